"""Every Python block of the documentation runs: the blocks of one page run in order, in one fresh
namespace, so each page is self-contained and its asserts check what the page claims."""
import importlib
import pathlib
import re
import types

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page):
    return BLOCK.findall(page.read_text())


PAGES = sorted(p for p in DOCS.rglob("*.md") if python_blocks(p))


def test_the_docs_have_code_to_run():
    assert PAGES, f"no page under {DOCS} has a ```python block"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files a page writes land in a scratch folder
    namespace = {"__name__": "__docs__"}
    for number, block in enumerate(python_blocks(page), 1):
        exec(compile(block, f"{page.name}[block {number}]", "exec"), namespace)


def test_block_pattern_finds_fenced_python_only():
    text = "x\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = 2\n```\n"
    assert BLOCK.findall(text) == ["a = 1\n", "b = 2\n"]


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
