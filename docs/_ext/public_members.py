"""A MkDocs hook for the API reference: a ``::: module`` block whose options say ``members: public`` gets the
module's public names as its member list, at build time, so a name added to a module is in the reference
without editing a page. ``members: public -other.module`` leaves out the names another page documents."""
import importlib
import re
import types

PUBLIC_BLOCK = re.compile(r"^::: (\S+)\n    options:\n      members: public((?: -\S+)*)\n", re.M)


def public_names(module_name):
    """The module's ``__all__``, or else its names without a leading underscore that rlpipe defines (not an
    imported ``OrderedDict``); submodules left out. In ``__all__``'s order, else sorted."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = sorted(name for name in dir(module) if not name.startswith("_")
                       and getattr(getattr(module, name), "__module__", "rlpipe").startswith("rlpipe"))
    return [name for name in names if not isinstance(getattr(module, name, None), types.ModuleType)]


def block_members(module_name, exclusions):
    """The names a ``members: public`` block lists: ``module_name``'s public names but those of the
    modules in ``exclusions`` (a string of `` -module`` items)."""
    left_out = {name for other in exclusions.split() for name in public_names(other.lstrip("-"))}
    return [name for name in public_names(module_name) if name not in left_out]


def expand(markdown):
    """``markdown`` with every ``members: public`` block's member list written out."""
    def members(match):
        names = block_members(match.group(1), match.group(2))
        return f"::: {match.group(1)}\n    options:\n      members:\n" + "".join(f"        - {n}\n" for n in names)
    return PUBLIC_BLOCK.sub(members, markdown)


def on_page_markdown(markdown, **kwargs):
    """MkDocs' hook: expands the page's ``members: public`` blocks before mkdocstrings renders them."""
    return expand(markdown)
