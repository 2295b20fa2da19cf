"""torch.multiprocessing's entry points: Python's ``multiprocessing`` (rlpipe tensors pickle by
value; there is no shared-memory tensor reduction: use ``Tensor.share_memory_``-free designs such
as the collectors' shared buffers)."""
from multiprocessing import *  # noqa: F401,F403
from multiprocessing import get_all_start_methods, get_context, get_start_method, set_start_method  # noqa: F401
