"""Lists rlpipe's public names that have no docstring.

A public name is a class or function defined in an rlpipe module (private modules included: ``rlpipe._tensor``
defines ``Tensor``) whose name has no leading underscore, and each public method or property such a class
defines itself. A method that overrides a documented one inherits its docstring (as ``inspect.getdoc`` and the API
reference read it), so it needs none of its own.

    python3 tools/docstring_gaps.py                 # every gap, one per line, then the count
    python3 tools/docstring_gaps.py rlpipe.envs     # only the names under these prefixes
"""
import importlib
import inspect
import pathlib
import pkgutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the rlpipe of this tree, not an install


def _modules():
    import rlpipe

    yield rlpipe
    for info in pkgutil.walk_packages(rlpipe.__path__, "rlpipe."):
        yield importlib.import_module(info.name)


def _members(cls):
    for name, attr in vars(cls).items():
        if name.startswith("_"):
            continue
        function = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
        if inspect.isfunction(function) or isinstance(attr, property):
            yield name, attr


def _documented_member(cls, name, attr):
    if isinstance(attr, property):
        return bool(attr.__doc__) or any(
            isinstance(vars(base).get(name), property) and vars(base)[name].__doc__ for base in cls.__mro__[1:])
    return bool(inspect.getdoc(getattr(cls, name)))


def gaps(prefixes=("rlpipe",)):
    """The dotted names of the public classes, functions, methods and properties without a docstring."""
    found = []
    for module in _modules():
        for name, obj in vars(module).items():
            if name.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if getattr(obj, "__module__", None) != module.__name__:
                continue  # imported here, checked where it is defined
            qualified = f"{module.__name__}.{name}"
            if not qualified.startswith(tuple(prefixes)):
                continue
            if not inspect.getdoc(obj):
                found.append(qualified)
            if inspect.isclass(obj):
                found += [f"{qualified}.{member}" for member, attr in _members(obj)
                          if not _documented_member(obj, member, attr)]
    return found


if __name__ == "__main__":
    missing = gaps(tuple(sys.argv[1:]) or ("rlpipe",))
    print("\n".join(missing))
    print(f"{len(missing)} public names without a docstring", file=sys.stderr)
