"""Every Python block of the documentation runs: the blocks of one page run in order, in one fresh
namespace, so each page is self-contained and its asserts check what the page claims."""
import pathlib
import re

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
