"""``named_submodules``: a module tree walked into one list."""

__all__ = ["named_submodules"]


def named_submodules(module, remove_duplicate=True):
    """[(dotted name, module)] of ``module`` and its submodules, as ``named_modules`` walks them, built
    as one list (the generators' recursion costs more than a small ensemble's call)."""
    found, seen = [], set()

    def walk(sub, prefix):
        if id(sub) in seen:
            return
        if remove_duplicate:
            seen.add(id(sub))
        found.append((prefix, sub))
        for name, child in sub._modules.items():
            if child is not None:
                walk(child, f"{prefix}.{name}" if prefix else name)
    walk(module, "")
    return found
