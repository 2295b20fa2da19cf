"""The tensordict package's structure: TensorDictBase is an abstract contract that every kind of
TensorDict fulfils, and the package's modules import one another without cycles."""
import ast
import pathlib

import pytest

import rlpipe
from rlpipe.tensordict import TensorDict, TensorDictBase
from rlpipe.tensordict._td import _SubTensorDict

_PACKAGE = pathlib.Path(rlpipe.tensordict.__file__).parent


def test_tensordict_base_cannot_be_built_and_names_its_contract():
    with pytest.raises(TypeError, match="abstract") as info:
        TensorDictBase()
    for name in ("get", "set", "keys", "batch_size", "_build", "__getitem__", "reshape"):
        assert name in str(info.value)


def test_a_kind_missing_part_of_the_contract_cannot_be_built():
    class OnlyKeys(TensorDictBase):
        def keys(self, include_nested=False, leaves_only=False, is_leaf=None, *, sort=False):
            return []

    assert "keys" not in OnlyKeys.__abstractmethods__ and "get" in OnlyKeys.__abstractmethods__
    with pytest.raises(TypeError, match="abstract"):
        OnlyKeys()


def test_every_tensordict_kind_is_a_tensordict_base():
    td = TensorDict({"a": rlpipe.zeros(4, 2)}, [4])
    assert isinstance(td, TensorDictBase)
    assert isinstance(td._get_sub_tensordict(slice(1, 3)), TensorDictBase)
    assert issubclass(_SubTensorDict, TensorDictBase)
    assert TensorDict.__abstractmethods__ == frozenset()
    assert type(TensorDict) is type  # no metaclass: isinstance(x, TensorDict) stays C-fast


def _module_name(path):
    parts = ("rlpipe", "tensordict", *path.relative_to(_PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts), parts[-1] == "__init__"


def _imports(path, known):
    """The package's modules that ``path`` imports, at module level or inside functions."""
    name, is_package = _module_name(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".")[:len(name.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            submodules = {f"{module}.{alias.name}" for alias in node.names} & known
            found |= submodules or {module}
    return {m for m in found if m in known and m != name}


def test_the_package_modules_import_each_other_without_cycles():
    paths = sorted(_PACKAGE.rglob("*.py"))
    known = {_module_name(p)[0] for p in paths}
    graph = {_module_name(p)[0]: _imports(p, known) for p in paths}
    state = {}

    def visit(module, path):
        state[module] = "open"
        for dep in sorted(graph[module]):
            assert state.get(dep) != "open", f"import cycle: {' -> '.join(path + [dep])}"
            if dep not in state:
                visit(dep, path + [dep])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_the_package_does_not_import_rlpipe_testing():
    for path in _PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = [alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in node.names] + [node.module or "" for node in ast.walk(tree)
                                             if isinstance(node, ast.ImportFrom)]
        assert "testing" not in names and "rlpipe.testing" not in names, path
