"""Small helpers shared by the layers above the core."""
