"""Every Python block of the documentation and of README.md runs: the blocks of one page run in order, in
one fresh namespace, so each page is self-contained and its asserts check what the page claims. A ```text
block right after a ```python block is what that block prints. The README stays short, and the API reference
lists every public name."""
import contextlib
import importlib
import importlib.util
import io
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n?", re.S | re.M)
# rlpipe's logger (torchrl's format) writes to the stdout of the time rlpipe was imported, with a timestamp:
# such lines of a shown output are not compared
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \[rlpipe[\w.]*\]\[[A-Z]+\] ")
README_MAX_WORDS = 1500


def python_blocks(page):
    return BLOCK.findall(page.read_text())


def blocks_with_output(text):
    """``[(code, shown output or None)]``: each ```python block, with the ```text block that follows it
    with nothing but blank lines between."""
    fences = list(FENCE.finditer(text))
    pairs = []
    for index, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        after = fences[index + 1] if index + 1 < len(fences) else None
        shown = None
        if after is not None and after.group(1) == "text" and not text[fence.end():after.start()].strip():
            shown = after.group(2)
        pairs.append((fence.group(2), shown))
    return pairs


def without_log_lines(output):
    return "\n".join(line for line in output.splitlines() if not LOG_LINE.match(line)).strip()


PAGES = sorted(p for p in DOCS.rglob("*.md") if python_blocks(p)) + [README]


def test_the_docs_have_code_to_run():
    assert len(PAGES) > 1, f"no page under {DOCS} has a ```python block"
    assert python_blocks(README), "README.md has no ```python block"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files a page writes land in a scratch folder
    for alias in ("torch", "tensordict", "torchrl"):  # rlpipe standing in for torch would print torch.Size
        monkeypatch.delitem(sys.modules, alias, raising=False)
    namespace = {"__name__": "__docs__"}
    for number, (block, shown) in enumerate(blocks_with_output(page.read_text()), 1):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block, f"{page.name}[block {number}]", "exec"), namespace)
        if shown is not None:
            assert without_log_lines(printed.getvalue()) == without_log_lines(shown), \
                f"{page.name}: block {number} prints something else than the output shown after it"


def test_block_pattern_finds_fenced_python_only():
    text = "x\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = 2\n```\n"
    assert BLOCK.findall(text) == ["a = 1\n", "b = 2\n"]


def test_shown_output_is_the_text_block_right_after():
    text = ("```python\nprint(1)\n```\n\n```text\n1\n```\n"          # output shown
            "```python\nx = 2\n```\nSome prose.\n```text\nan illustration\n```\n"  # prose between: not output
            "```python\ny = 3\n```\n")
    assert blocks_with_output(text) == [("print(1)\n", "1\n"), ("x = 2\n", None), ("y = 3\n", None)]


def test_log_lines_are_left_out_of_the_comparison():
    shown = "2026-11-28 20:45:01,386 [rlpipe][INFO] Initialized LazyTensorStorage\n1000 3\n"
    assert without_log_lines(shown) == "1000 3"
    assert without_log_lines("[rlpipe] not a log line\n") == "[rlpipe] not a log line"


def test_reference_fences_interpreter_examples():
    # the Griffe extension that turns docstrings' >>> examples into code blocks for the API reference
    pytest.importorskip("griffe")  # the docs extra
    spec = importlib.util.spec_from_file_location("doctest_blocks", DOCS / "_ext" / "doctest_blocks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = "Text.\n\n    >>> td['next', 'reward'].shape\n    rlpipe.Size([2, 1])\n\nMore text.\n>>> 1\n1"
    assert module.fence_doctests(doc) == ("Text.\n\n    ```pycon\n    >>> td['next', 'reward'].shape\n"
                                          "    rlpipe.Size([2, 1])\n    ```\n\nMore text.\n```pycon\n>>> 1\n1\n```")
    assert module.fence_doctests("no example here") == "no example here"


def words(text):
    """Every whitespace-separated word, code blocks and tables included (what ``wc -w`` counts)."""
    return len(text.split())


def test_readme_is_short():
    assert words(README.read_text()) <= README_MAX_WORDS, \
        f"README.md has {words(README.read_text())} words, more than {README_MAX_WORDS}: move details to docs/"


def test_readme_links_reach_files():
    # the README's relative links (docs pages, the page of deliberate differences) point at files that exist
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/coming-from-pytorch.md" in local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files {missing}"


# the API reference: a ``::: module`` block per public module; ``members: public`` lists its public names at
# build time (docs/_ext/public_members.py), and Griffe, which renders them, must find each of them
REFERENCE = DOCS / "reference"
PUBLIC_MODULES = ["rlpipe", "rlpipe.autograd", "rlpipe.nn", "rlpipe.nn.functional", "rlpipe.nn.init", "rlpipe.nn.utils",
                  "rlpipe.optim", "rlpipe.optim.lr_scheduler", "rlpipe.distributions", "rlpipe.func",
                  "rlpipe.tensordict", "rlpipe.tensordict.nn", "rlpipe.envs", "rlpipe.envs.transforms",
                  "rlpipe.collectors", "rlpipe.collectors.distributed", "rlpipe.data", "rlpipe.postprocs",
                  "rlpipe.objectives", "rlpipe.objectives.value", "rlpipe.modules", "rlpipe.record",
                  "rlpipe.utils.hooks", "rlpipe.utils.benchmark", "rlpipe.utils.tensorboard"]


def load_ext(name):
    """A module of docs/_ext (the site's hook and Griffe extension), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, DOCS / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


public_members = load_ext("public_members")


def reference_blocks():
    """``{module: (page, the names its block lists)}`` over the reference pages' ``members: public`` blocks."""
    blocks = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for match in public_members.PUBLIC_BLOCK.finditer(page.read_text()):
            blocks[match.group(1)] = (page, public_members.block_members(match.group(1), match.group(2)))
    return blocks


def test_reference_covers_every_public_module():
    missing = sorted(set(PUBLIC_MODULES) - set(reference_blocks()))
    assert not missing, f"no ::: block with members: public under {REFERENCE} for {missing}"


def test_members_public_expands_to_the_module_names():
    page = "# x\n\n::: rlpipe.func\n    options:\n      members: public\n\ntext\n"
    expected = "".join(f"        - {name}\n" for name in ["functional_call", "stack_module_state", "vmap", "grad",
                                                          "grad_and_value"])
    assert public_members.expand(page) == f"# x\n\n::: rlpipe.func\n    options:\n      members:\n{expected}\ntext\n"
    envs = public_members.block_members("rlpipe.envs", " -rlpipe.envs.transforms")
    assert "GymEnv" in envs and "StepCounter" not in envs
    assert "StepCounter" in public_members.public_names("rlpipe.envs")


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_reference_renders_every_public_name(module_name):
    # Griffe reads the sources without importing them: a name it cannot follow to a class, function or value
    # (a tuple-assigned alias, a lazily imported class, a name shadowed by a submodule) is left out of the
    # page silently, so each such name must be named in backticks in the page's text or get a block of its own
    griffe = pytest.importorskip("griffe")  # the docs extra
    package = load_griffe_package(griffe)
    page, names = reference_blocks()[module_name]
    text = page.read_text()
    mentioned = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text))
    own_blocks = {path.rsplit(".", 1)[-1] for path in re.findall(r"^::: (\S+)$", text, re.M)}
    module = package if module_name == "rlpipe" else package[module_name.removeprefix("rlpipe.")]
    unrendered = sorted(name for name in names if not renders(module, name) and name not in mentioned | own_blocks)
    assert not unrendered, f"{page.name}: Griffe cannot render {module_name}'s {unrendered}"


_GRIFFE_PACKAGE = []


def load_griffe_package(griffe):
    """rlpipe as Griffe reads it, loaded once."""
    if not _GRIFFE_PACKAGE:
        _GRIFFE_PACKAGE.append(griffe.load("rlpipe", search_paths=[str(ROOT)], resolve_aliases=True,
                                           resolve_external=False))
    return _GRIFFE_PACKAGE[0]


def renders(module, name):
    """Whether Griffe finds ``name`` in ``module`` as something other than a module."""
    member = module.members.get(name)
    if member is None:
        return False
    try:
        return not (member.final_target if member.is_alias else member).is_module
    except Exception:  # noqa: BLE001 - Griffe's AliasResolutionError and cyclic-alias errors alike
        return False
