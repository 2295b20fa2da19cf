"""Every public name has a docstring (issue 31): ``tools/docstring_gaps.py`` run as a test.

Every module of rlpipe is checked.
"""
import importlib.util
import pathlib
import sys
import textwrap
import types

import pytest

_TOOL = pathlib.Path(__file__).resolve().parent.parent / "tools" / "docstring_gaps.py"

CHECKED = ("rlpipe",)


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("docstring_gaps", _TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_a_docstring(tool):
    missing = tool.gaps(CHECKED)
    assert not missing, f"{len(missing)} public names without a docstring:\n" + "\n".join(missing)


def test_every_public_class_has_its_own_docstring(tool):
    """Stricter than the tool, which lets a class inherit its base's docstring as ``inspect.getdoc`` does:
    ``help(Normal)`` showing Distribution's text would not describe Normal."""
    bare = [f"{module.__name__}.{name}" for module in tool._modules() for name, obj in vars(module).items()
            if isinstance(obj, type) and obj.__module__ == module.__name__ and not name.startswith("_")
            and not vars(obj).get("__doc__") and f"{module.__name__}.{name}".startswith(CHECKED)]
    assert not bare, f"{len(bare)} public classes without a docstring of their own:\n" + "\n".join(bare)


_SYNTHETIC = '''
import os
from os.path import join


def documented():
    """Says what it does."""


def undocumented():
    pass


def _private():
    pass


class Base:
    """A base class."""

    def run(self):
        """Runs."""

    @property
    def size(self):
        """The size."""
        return 1


class Child(Base):
    def run(self):
        pass

    @property
    def size(self):
        return 2

    def stop(self):
        pass

    @property
    def name(self):
        return "child"

    def _helper(self):
        pass


class Bare:
    pass
'''


def _only_synthetic(tool, monkeypatch):
    """Makes the tool walk only a module built from ``_SYNTHETIC``."""
    module = types.ModuleType("rlpipe_synthetic")
    exec(compile(textwrap.dedent(_SYNTHETIC), "rlpipe_synthetic.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)  # where inspect looks up a method's class
    monkeypatch.setattr(tool, "_modules", lambda: [module])


def test_the_check_finds_the_gaps_of_a_synthetic_module(tool, monkeypatch):
    """The undocumented function, method, property and class are listed; documented names, overrides of
    documented members, private names and imported ones are not."""
    _only_synthetic(tool, monkeypatch)
    assert tool.gaps(("rlpipe_synthetic",)) == [
        "rlpipe_synthetic.undocumented", "rlpipe_synthetic.Child.stop", "rlpipe_synthetic.Child.name",
        "rlpipe_synthetic.Bare"]


def test_the_prefixes_select_the_names(tool, monkeypatch):
    _only_synthetic(tool, monkeypatch)
    assert tool.gaps(("rlpipe_synthetic.Child",)) == ["rlpipe_synthetic.Child.stop", "rlpipe_synthetic.Child.name"]
    assert tool.gaps(("rlpipe.elsewhere",)) == []
