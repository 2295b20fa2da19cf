"""rlpipe under an import alias (torch -> rlpipe), as the peers' code and test suites run it.

An alias finder hands back rlpipe's own modules under the peer's names, and Python then replaces
each module's ``__spec__``. From that moment a relative import that runs late (inside a function)
sees ``__package__ != __spec__.parent`` and warns (ImportWarning); the peers' test files turn every
warning into an error. So every import inside a function must be absolute.
"""
import ast
import pathlib

import rlpipe

PACKAGE = pathlib.Path(rlpipe.__file__).parent


def _late_relative_imports(path):
    """(line, source) of each relative import inside a function or method of one file."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [(inner.lineno, ast.unparse(inner)) for inner in ast.walk(node)
                      if isinstance(inner, ast.ImportFrom) and inner.level > 0]
    return found


def test_the_scan_finds_a_relative_import_inside_a_function(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from . import top\n\ndef f():\n    from ._x import y\n    return y\n")
    assert _late_relative_imports(source) == [(4, "from ._x import y")]


def test_no_relative_import_runs_inside_a_function():
    offenders = {str(path.relative_to(PACKAGE.parent)): found for path in sorted(PACKAGE.rglob("*.py"))
                 if (found := _late_relative_imports(path))}
    assert offenders == {}
