"""Stored text as HTML a browser shows and never runs: Markdown rendered by markdown-it
with raw HTML escaped (never passed through), links kept only for web and mail addresses
and opened with `rel="noopener noreferrer"`, images written as links (nothing is fetched
from elsewhere), code coloured by Pygments. Used by `history export` and the page."""

from __future__ import annotations

import html
import json
from functools import lru_cache
from typing import Any

_LINK_SCHEMES = ("http://", "https://", "mailto:")


def markdown(text: str) -> str:
    """`text` as HTML; safe to put in a page whatever it holds."""
    return str(_renderer().render(text))


def highlight(code: str, language: str, attributes: str = "") -> str:
    """Code as Pygments' coloured spans (class names only: the stylesheet colours them)."""
    from pygments import highlight as coloured
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TextLexer, get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    return str(coloured(code, lexer, HtmlFormatter(style="default", nowrap=True)))


def arguments(text: str) -> str:
    """A tool call's arguments laid out (as sent when they are not JSON)."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to lay out
        return text


def code_styles(selector: str) -> str:
    """Pygments' colours for the classes `highlight` writes, under `selector`."""
    from pygments.formatters import HtmlFormatter

    return str(HtmlFormatter(style="default").get_style_defs(selector))


@lru_cache(maxsize=1)
def _renderer() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "highlight": highlight}).enable(
        ["table", "strikethrough"]
    )
    # markdown-it already refuses javascript:, vbscript:, file: and most data: links;
    # only web and mail addresses (and the page's own anchors) stay links here.
    md.validateLink = _allowed_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    return md


def _allowed_link(url: str) -> bool:
    found = url.strip().lower()
    return found.startswith(_LINK_SCHEMES) or found.startswith("#")


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", "noopener noreferrer")
    return str(self.renderToken(tokens, idx, options, env))


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """An image a message points at is a link to it, never loaded."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = html.escape(token.content or "image", quote=False)
    if not _allowed_link(src):
        return f"[image: {alt}]"
    return f'<a href="{html.escape(src)}" rel="noopener noreferrer">[image: {alt}]</a>'
