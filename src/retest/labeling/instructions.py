"""The project's instructions to labelers: which text applies, and its safe HTML.

One setting, ``[instructions]`` in ``retest.toml`` (Markdown under ``default``, a
class name or a keyword), is what the web pages and the MTurk question show;
:func:`pick_instructions` is the one rule for which entry applies, and
:data:`GRID_INSTRUCTIONS` the built-in text of a grid task when none does.

The Markdown is a tiny, safe subset. Everything is HTML-escaped first, so no markup in the text reaches the page;
then paragraphs (blank lines), ``- `` lists, ``**bold**``, ``*italic*``,
```code``` and ``[text](https://…)`` links (http and https only; they open
without a referrer) become HTML. No dependency: the instructions are a few
lines, not documents.

Examples
--------
>>> str(render_markdown("Only **photos**.\\n\\n- no <b>drawings</b>\\n- see [the guide](https://x.org/a?b=1&c=2)"))
'<p>Only <strong>photos</strong>.</p>\\n<ul><li>no &lt;b&gt;drawings&lt;/b&gt;</li><li>see <a href="https://x.org/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank">the guide</a></li></ul>'
>>> str(render_markdown("[x](javascript:alert(1))"))
'<p>[x](javascript:alert(1))</p>'
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

__all__ = ["GRID_INSTRUCTIONS", "pick_instructions", "render_markdown"]

GRID_INSTRUCTIONS = (
    "Check every image that shows at least one object of the class, even when it "
    "is partly hidden, small, or among other objects, clutter or text. Leave an "
    "image unchecked when it shows none, or when you cannot tell."
)
"""What a grid task asks when the project sets no instructions: nothing about
the kind of image (photographs, drawings, scans), which is the project's call."""


def pick_instructions(
    instructions: Mapping[str, str], class_name: str, keyword: str | None = None
) -> str | None:
    """The most specific entry of ``[instructions]`` for a page: the keyword's, the
    class's, then ``default``; None when the project sets none of them.

    >>> pick_instructions({"default": "d", "cat": "c"}, "cat", "tabby")
    'c'
    >>> pick_instructions({"default": "d"}, "dog")
    'd'
    """
    for key in (keyword, class_name, "default"):
        if key is not None and key in instructions:
            return instructions[key]
    return None


_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*(?!\s)(.+?)(?<!\s)\*(?![*\w])")
_CODE = re.compile(r"`([^`\n]+)`")


def _inline(text: str) -> str:
    out = html.escape(text, quote=True)
    out = _CODE.sub(r"<code>\1</code>", out)
    out = _LINK.sub(
        r'<a href="\2" rel="noopener noreferrer" target="_blank">\1</a>', out
    )
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    return _ITALIC.sub(r"<em>\1</em>", out)


def render_markdown(text: str) -> str:
    """The HTML of ``text`` (see the module doc), safe to put in a page."""
    blocks = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        if all(ln.startswith(("- ", "* ")) for ln in lines):
            items = "".join(f"<li>{_inline(ln[2:])}</li>" for ln in lines)
            blocks.append(f"<ul>{items}</ul>")
        else:
            blocks.append(f"<p>{_inline(' '.join(lines))}</p>")
    return "\n".join(blocks)
