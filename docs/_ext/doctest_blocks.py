"""A Griffe extension for the API reference: docstring examples written as interpreter sessions (``>>>``
lines and the output under them, up to a blank line) become fenced ``pycon`` blocks, so Markdown shows them
as code instead of reading ``>>>`` as quotes and ``td["next", "reward"]`` as a link."""
import griffe


def fence_doctests(text):
    """Returns ``text`` with each run of ``>>>`` lines (and the output lines after it) in a fenced block."""
    lines, out, index = text.split("\n"), [], 0
    while index < len(lines):
        if not lines[index].lstrip().startswith(">>>"):
            out.append(lines[index])
            index += 1
            continue
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
        out.append(indent + "```pycon")
        while index < len(lines) and lines[index].strip():
            out.append(lines[index])
            index += 1
        out.append(indent + "```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fences the interpreter-session examples of every docstring Griffe loads."""

    def on_object(self, *, obj, **kwargs):
        """Rewrites ``obj``'s docstring in place when it holds ``>>>`` lines."""
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
