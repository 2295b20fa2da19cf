"""Runs peer code (PyTorch, tensordict and torchrl scripts or test files) against rlpipe: importing
this module maps ``torch`` to ``rlpipe``, ``tensordict`` to ``rlpipe.tensordict`` and ``torchrl`` to
``rlpipe``, submodules included (``torchrl.envs.utils`` is ``rlpipe.envs.utils``).

For differential checks only; rlpipe never imports it. Keep the peers' files outside the repository:

    cd /tmp/peer && PYTHONPATH=/path/to/rlpipe/tools \
        python3 -c "import peer_shim, runpy; runpy.run_path('script.py', run_name='__main__')"

or, for a peer's test files, a ``conftest.py`` beside them that does ``import peer_shim``.
"""
import importlib
import importlib.abc
import importlib.util
import sys

TARGETS = {"torch": "rlpipe", "tensordict": "rlpipe.tensordict", "torchrl": "rlpipe"}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torch.X`` and friends and hands out the rlpipe module itself (not a copy)."""

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in TARGETS:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        root, _, rest = spec.name.partition(".")
        module = importlib.import_module(TARGETS[root] + ("." + rest if rest else ""))
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        # already imported by create_module; importlib has just set module.__spec__ to the alias's
        # spec: put rlpipe's back, or every relative import inside an rlpipe function would warn
        # (ImportWarning "__package__ != __spec__.parent", an error under filterwarnings("error"))
        module.__spec__ = module.__spec__.loader_state


sys.meta_path.insert(0, _Alias())
