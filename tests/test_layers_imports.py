"""rlpipe's layers (DESIGN.md "Layers"): every module imports only from its own layer or the layers
below, and the only import circle between modules is the core's (as in PyTorch, where ``torch._tensor``,
``torch.autograd`` and the functional API need one another).

The imports are read from the source with ``ast``, not by importing: every ``import``/``from``
statement counts, those inside functions too (a lazy import still makes the module depend on its
target, and two modules that import each other lazily are still a circle).
"""
import ast
import pathlib

RLPIPE_DIR = pathlib.Path(__file__).resolve().parents[1] / "rlpipe"

FACADE_LAYER = 7
CORE_LAYER = 2

# The one table of layers: package or module -> layer; the longest prefix of a module's name decides.
LAYERS = {
    # the facade: ``import rlpipe`` gives torch's namespace, so it may import everything (it matches only
    # itself, never as a prefix)
    "rlpipe": FACADE_LAYER,
    "rlpipe.backends": 1,
    "rlpipe.kernels": 1.5,
    # the core: the tensor, its primitives and functional API, autograd, dtypes, devices, random,
    # creation and save/load
    "rlpipe._tensor": CORE_LAYER,
    "rlpipe._creation": CORE_LAYER,
    "rlpipe._device": CORE_LAYER,
    "rlpipe._dtypes": CORE_LAYER,
    "rlpipe._dispatch": CORE_LAYER,
    "rlpipe._format": CORE_LAYER,
    "rlpipe._memory_format": CORE_LAYER,
    "rlpipe.primitives": CORE_LAYER,
    "rlpipe.autograd": CORE_LAYER,
    "rlpipe.random": CORE_LAYER,
    "rlpipe.serialization": CORE_LAYER,
    "rlpipe.return_types": CORE_LAYER,
    # torch's top-level helpers at their torch paths sit in the core, as in torch: __future__'s switches,
    # the fake-tensor names (_subclasses), multiprocessing (Python's), cuda's device queries and seeding,
    # utils (hooks' RemovableHandle, which Tensor uses; _pytree; the TensorBoard writer, which reads
    # tensors), and safetensors (save/load of tensors in another file format, beside serialization)
    "rlpipe.__future__": CORE_LAYER,
    "rlpipe._subclasses": CORE_LAYER,
    "rlpipe.multiprocessing": CORE_LAYER,
    "rlpipe.cuda": CORE_LAYER,
    "rlpipe.accelerator": CORE_LAYER,  # torch.accelerator: cuda's answers under device-agnostic names
    "rlpipe.linalg": CORE_LAYER,  # torch.linalg: the core's linear-algebra ops at torch's paths
    "rlpipe.utils": CORE_LAYER,
    "rlpipe.safetensors": CORE_LAYER,
    "rlpipe.compiler": CORE_LAYER,  # torch.compiler's switches (no-ops: rlpipe compiles nothing)
    # torchrl._utils's path, but plain-Python helpers (key handling, warnings switches, ``unavailable``)
    # that import nothing from rlpipe; the core uses them, so they sit in it
    "rlpipe._utils": CORE_LAYER,
    # the closeness check behind testing.assert_close and tensordict's assert_allclose_td: array math only
    "rlpipe._closeness": CORE_LAYER,
    # child processes that die with their parent (prctl, reaping): standard library only; the envs' async
    # vector envs and the collectors' workers both use it
    "rlpipe._processes": CORE_LAYER,
    "rlpipe.special": CORE_LAYER,  # torch.special: the core's special functions at torch's path
    "rlpipe.nn": 3,
    "rlpipe.optim": 3,
    "rlpipe.distributions": 3,
    "rlpipe.func": 3,
    "rlpipe.tensordict": 4,
    # torch.testing's assert_close with tensordict's assert_allclose_td and torchrl.testing's make_tc:
    # it builds TensorDicts and tensorclasses, so it sits with tensordict (nothing below may use it)
    "rlpipe.testing": 4,
    # torch.testing._internal's helpers for running PyTorch's own test files: TestCase, parametrize, the
    # device-type test classes. Core-level test support, but built on nn (ModuleList in assertEqual,
    # NNTestCase) and on the package above, so it sits with it
    "rlpipe.testing._internal": 4,
    "rlpipe.envs": 5,
    "rlpipe.collectors": 6,
    "rlpipe.postprocs": 6,
    "rlpipe.data": 6,
    "rlpipe.objectives": 6,
    "rlpipe.modules": 6,
    "rlpipe.record": 6,
    "rlpipe.checkpoint": 6,  # torchrl.checkpoint: saves policies, optimizers, replay buffers, RNG state
    "rlpipe.trainers": 6,  # torchrl.trainers: the training loop over a collector, its hooks
    # ``python -m rlpipe.cuda.selfcheck``: a command-line check that drives the whole library (MultiStep,
    # an MLP, the DQN example), an application like examples/, at the facade's level
    "rlpipe.cuda.selfcheck": FACADE_LAYER,
}


def module_files(root):
    """{module name: file} for every ``.py`` file under the package directory ``root``."""
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def layer_of(module, layers):
    """The layer of ``module``: the table's entry for its longest prefix (a bare package name only
    for that package itself, so the facade is no catch-all); KeyError when the table has none."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in layers and (n > 1 or n == len(parts)):
            return layers[prefix]
    raise KeyError(f"module {module!r} has no layer: add its package to the layer table")


def imported_modules(node, package, modules):
    """The modules an ``import``/``from`` statement ``node`` imports, made inside ``package``: for
    ``from x import y``, ``x.y`` when that is one of ``modules``, else ``x``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = package.split(".")
        source = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
    else:
        source = node.module
    return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names]


def read_imports(files, top):
    """[(module, file, line, target module)] for every import of a module under the package ``top``
    made by the modules in ``files`` ({module: file})."""
    imports = []
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports += [(module, path, node.lineno, target)
                            for target in imported_modules(node, package, files)
                            if target == top or target.startswith(top + ".")]
    return imports


def upward_imports(root, layers):
    """One message per module the table has no layer for, and per import from a lower layer to a
    higher one."""
    files = module_files(root)
    problems = []
    for module, path in files.items():
        try:
            layer_of(module, layers)
        except KeyError as e:
            problems.append(f"{path.relative_to(root.parent)}: {e.args[0]}")
    for module, path, line, target in read_imports(files, root.name):
        try:
            source_layer, target_layer = layer_of(module, layers), layer_of(target, layers)
        except KeyError:
            continue  # reported above
        if target_layer > source_layer:
            problems.append(f"{path.relative_to(root.parent)}:{line}: {module} (layer {source_layer}) imports "
                            f"{target} (layer {target_layer})")
    return sorted(set(problems))


def import_graph(root):
    """{module: set of modules it imports}, within the package at ``root``."""
    files = module_files(root)
    graph = {module: set() for module in files}
    for module, _, _, target in read_imports(files, root.name):
        if target in graph and target != module:
            graph[module].add(target)
    return graph


def strongly_connected_components(graph):
    """The strongly connected components of ``graph`` (Tarjan's algorithm, without recursion)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
            elif successor not in index:
                index[successor] = low[successor] = len(index)
                stack.append(successor)
                on_stack.add(successor)
                work.append((successor, iter(sorted(graph[successor]))))
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
    return components


def shortest_cycle(graph, start, members):
    """The shortest path from ``start`` back to itself through ``members`` (breadth first)."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph[node] & members):
                if successor == start:
                    return paths[node] + [start]
                if successor not in paths:
                    paths[successor] = paths[node] + [successor]
                    following.append(successor)
        frontier = following
    raise ValueError(f"{start!r} is on no cycle within {sorted(members)}")


def import_circles(root):
    """Each circle of modules (a strongly connected component of more than one) as a message naming
    its members and one cycle through them."""
    graph = import_graph(root)
    circles = []
    for component in strongly_connected_components(graph):
        if len(component) > 1:
            start = min(component)
            circles.append(f"{len(component)} modules {sorted(component)}; one cycle: "
                           + " -> ".join(shortest_cycle(graph, start, component)))
    return sorted(circles)


def test_no_import_runs_upward():
    problems = upward_imports(RLPIPE_DIR, LAYERS)
    assert not problems, "imports from a lower layer to a higher one:\n" + "\n".join(problems)


def test_the_only_import_circle_is_the_cores():
    circles = import_circles(RLPIPE_DIR)
    assert len(circles) <= 1, f"{len(circles)} import circles, expected at most the core's:\n" + "\n".join(circles)
    core = [c for c in strongly_connected_components(import_graph(RLPIPE_DIR)) if len(c) > 1]
    outside_core = sorted(m for c in core for m in c if layer_of(m, LAYERS) != CORE_LAYER)
    assert not outside_core, f"the import circle reaches outside the core: {outside_core}"


# the checks themselves, on a small package written here

def write_package(root, sources):
    """Writes {relative path: source} under ``root`` and returns the package directory ``root/pkg``."""
    for relative, source in sources.items():
        path = root / "pkg" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root / "pkg"


SMALL_LAYERS = {"pkg": 9, "pkg.low": 1, "pkg.high": 2, "pkg.high.app": 3}


def test_upward_imports_names_file_line_and_layers(tmp_path):
    package = write_package(tmp_path, {
        "__init__.py": "from . import low, high\n",
        "low/__init__.py": "import os\n\n\ndef lazy():\n    from ..high import tool\n    return tool\n",
        "low/base.py": "from pkg.high.app import main\n",
        "high/__init__.py": "from ..low import base\n",
        "high/app.py": "import pkg.low\nfrom pkg import high\n",
    })
    assert upward_imports(package, SMALL_LAYERS) == [
        "pkg/low/__init__.py:5: pkg.low (layer 1) imports pkg.high (layer 2)",
        "pkg/low/base.py:1: pkg.low.base (layer 1) imports pkg.high.app (layer 3)",
    ]


def test_upward_imports_reports_each_module_without_a_layer(tmp_path):
    package = write_package(tmp_path, {"__init__.py": "", "stray.py": "from . import low\n", "low.py": "",
                                       "quiet.py": "import os\n"})
    assert upward_imports(package, SMALL_LAYERS) == [
        "pkg/quiet.py: module 'pkg.quiet' has no layer: add its package to the layer table",
        "pkg/stray.py: module 'pkg.stray' has no layer: add its package to the layer table"]


def test_the_facade_is_no_catch_all():
    assert layer_of("pkg", SMALL_LAYERS) == 9
    assert layer_of("pkg.high.app.cli", SMALL_LAYERS) == 3
    try:
        layer_of("pkg.other", SMALL_LAYERS)
    except KeyError as e:
        assert "pkg.other" in e.args[0]
    else:
        raise AssertionError("pkg.other got a layer from the facade's entry")


def test_import_circles_lists_each_circle(tmp_path):
    package = write_package(tmp_path, {
        "__init__.py": "from . import a\n",
        "a.py": "from . import b\n",
        "b.py": "from .c import thing\n",
        "c.py": "import pkg.a\n",
        "d.py": "from pkg import e\n",
        "e.py": "def lazy():\n    from . import d\n",  # inside a function: a circle all the same
        "f.py": "from . import g\n",
        "g.py": "import os\n",
    })
    assert import_circles(package) == [
        "2 modules ['pkg.d', 'pkg.e']; one cycle: pkg.d -> pkg.e -> pkg.d",
        "3 modules ['pkg.a', 'pkg.b', 'pkg.c']; one cycle: pkg.a -> pkg.b -> pkg.c -> pkg.a",
    ]


MAX_MODULE_LINES = 1000  # a module longer than this is split by concern (issue 25); rlpipe has no generated tables


def long_modules(root, limit=MAX_MODULE_LINES):
    """(path, lines) of the Python files under ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(pathlib.Path(root).rglob("*.py")):
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > limit:
            found.append((str(path.relative_to(pathlib.Path(root).parent)), lines))
    return found


def test_no_module_is_too_long_to_read():
    assert not long_modules(RLPIPE_DIR), f"split these by concern (at most {MAX_MODULE_LINES} lines): " \
        f"{long_modules(RLPIPE_DIR)}"


def test_long_modules_finds_a_long_file(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "short.py").write_text("x = 1\n" * 10)
    (pkg / "long.py").write_text("x = 1\n" * 11)
    assert long_modules(pkg, limit=10) == [("pkg/long.py", 11)]
