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
import types

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


# the API reference: one ``::: module`` block per public module, its members listed by name
REFERENCE = DOCS / "reference"
REFERENCE_BLOCK = re.compile(r"^::: (\S+)\n    options:\n      members:\n((?:        - \S+\n)+)", re.M)
PUBLIC_MODULES = ["rlpipe", "rlpipe.autograd", "rlpipe.nn", "rlpipe.nn.functional", "rlpipe.nn.init", "rlpipe.nn.utils",
                  "rlpipe.optim", "rlpipe.optim.lr_scheduler", "rlpipe.distributions", "rlpipe.func",
                  "rlpipe.tensordict", "rlpipe.tensordict.nn", "rlpipe.envs", "rlpipe.envs.transforms",
                  "rlpipe.collectors", "rlpipe.collectors.distributed", "rlpipe.data", "rlpipe.postprocs",
                  "rlpipe.objectives", "rlpipe.objectives.value", "rlpipe.modules", "rlpipe.record",
                  "rlpipe.utils.hooks", "rlpipe.utils.benchmark", "rlpipe.utils.tensorboard"]


def public_names(module_name):
    """The module's ``__all__``, or else its names without a leading underscore that rlpipe defines
    (not an imported ``OrderedDict``); submodules left out."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name in dir(module) if not name.startswith("_")
                 and getattr(getattr(module, name), "__module__", "rlpipe").startswith("rlpipe")]
    return {name for name in names if not isinstance(getattr(module, name, None), types.ModuleType)}


def reference_blocks():
    """``{module: (page, listed member names)}`` over every reference page."""
    blocks = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for module, members in REFERENCE_BLOCK.findall(page.read_text()):
            blocks[module] = (page, set(re.findall(r"- (\S+)", members)))
    return blocks


def documented_objects():
    """The ids of the objects the reference pages list, to find a name re-exported by another module."""
    return {id(getattr(importlib.import_module(module), name, None))
            for module, (_, members) in reference_blocks().items() for name in members}


def test_reference_covers_every_public_module():
    missing = sorted(set(PUBLIC_MODULES) - set(reference_blocks()))
    assert not missing, f"no ::: block with a members list under {REFERENCE} for {missing}"


@pytest.mark.parametrize("module_name", sorted(reference_blocks()))
def test_reference_lists_every_public_name(module_name):
    # a name is listed as a member, or named in backticks on the page (an alias, a name documented elsewhere),
    # or is an object another block lists (rlpipe.envs re-exports the transforms of rlpipe.envs.transforms)
    page, members = reference_blocks()[module_name]
    mentioned = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", page.read_text()))
    module, elsewhere = importlib.import_module(module_name), documented_objects()
    unlisted = sorted(name for name in public_names(module_name) - members - mentioned
                      if id(getattr(module, name)) not in elsewhere)
    assert not unlisted, f"{page.name} does not list {module_name}'s public names {unlisted}"
