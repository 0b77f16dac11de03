"""A conversation to share: one Markdown document, or one self-contained HTML page.

The page needs nothing but itself: styles inline, code highlighted by Pygments at export
time, no script, no font, no image fetched (a Content-Security-Policy forbids any request,
so even an image a reply links to stays unloaded). An image a client sent as a `data:` URL
is shown inline; any other content part (an image by URL, audio, a file) by its label
(SPEC §6). Markdown is rendered by markdown-it with raw HTML escaped, never passed
through. Tool calls and results fold; compression summaries are marked as such.
"""

from __future__ import annotations

import html
from typing import Any

from koogcli.core import content_parts
from koogcli.core.messages import Message, local_time
from koogcli.core.results import SharedConversation
from koogcli.ui import html_text

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 52rem; margin: 2rem auto;
       padding: 0 1rem; color: #1f2328; background: #fff; }
header { border-bottom: 1px solid #d0d7de; margin-bottom: 1.5rem; }
header h1 { margin: 0 0 .25rem; font-size: 1.5rem; }
header p { margin: 0 0 1rem; color: #59636e; }
.msg { border: 1px solid #d0d7de; border-radius: 8px; margin: 0 0 1rem; padding: .5rem 1rem; }
.msg > .who { font-weight: 600; font-size: .85rem; text-transform: uppercase;
              letter-spacing: .04em; color: #59636e; }
.msg > .who time { font-weight: 400; text-transform: none; margin-left: .5rem; }
.user { background: #ddf4ff; border-color: #80ccff; margin-left: 4rem; }
.assistant { background: #fff; }
.system { background: #f6f8fa; color: #59636e; }
.tool { background: #fbf8ef; border-color: #e3d49a; }
.summary { background: #fff8c5; border-color: #d4a72c; }
.summary > .note { font-style: italic; color: #7d4e00; }
details { margin: .5rem 0; }
summary { cursor: pointer; font-family: ui-monospace, monospace; font-size: .9rem; }
pre { background: #f6f8fa; padding: .75rem; border-radius: 6px; overflow-x: auto; }
code { font-family: ui-monospace, SFMono-Regular, monospace; font-size: .9em; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { border: 1px solid #d0d7de; padding: .25rem .6rem; }
th { background: #f6f8fa; }
blockquote { border-left: 4px solid #d0d7de; margin: 0; padding: 0 1rem; color: #59636e; }
figure { margin: .5rem 0; }
figure img { max-width: 100%; height: auto; border-radius: 4px; }
figcaption, .part { font-family: ui-monospace, monospace; font-size: .85rem; color: #59636e; }
"""


def to_markdown(shared: SharedConversation) -> str:
    """The conversation as Markdown: a heading per message, tool exchanges as code."""
    out = [f"# {shared.session}", "", _byline(shared), ""]
    for m in shared.messages:
        out.append(f"### {_label(m)} · {local_time(m.created_at)}")
        out.append("")
        if _kind(m):
            out += [f"> {line}" if line else ">" for line in _kind_note(m).splitlines()] + [""]
        if m.role == "tool":
            out += ["```", m.text, "```"]
        elif m.text:
            out.append(m.text)
        labels = content_parts.labels(m)
        out += ([""] if labels and m.text else []) + labels
        for call in m.tool_calls:
            out += [
                "",
                f"Tool call `{call.name}`:",
                "",
                "```json",
                html_text.arguments(call.arguments),
                "```",
            ]
        out.append("")
    return "\n".join(out)


def to_html(shared: SharedConversation) -> str:
    """One self-contained page that works offline."""
    title = html.escape(f"koog · {shared.session}")
    styles = _STYLE + html_text.code_styles("pre")
    sections = "\n".join(_section(m) for m in shared.messages)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{styles}</style>\n</head>\n<body>\n"
        f"<header><h1>{html.escape(shared.session)}</h1><p>{html.escape(_byline(shared))}"
        f"</p></header>\n<main>\n{sections}\n</main>\n</body>\n</html>\n"
    )


def _section(m: Message) -> str:
    kind = _kind(m)
    classes = f"msg {m.role}" + (" summary" if kind else "")
    parts = [
        f'<section class="{classes}"><div class="who">{html.escape(_label(m))}'
        f'<time datetime="{html.escape(m.created_at)}">{html.escape(local_time(m.created_at))}'
        "</time></div>"
    ]
    if kind:
        parts.append(f'<p class="note">{html.escape(_kind_note(m))}</p>')
    if m.role == "tool":
        parts.append(
            f"<details><summary>result of {html.escape(m.name or 'a tool')}</summary>"
            f"<pre><code>{html.escape(m.text)}</code></pre></details>"
        )
    elif m.text:
        parts.append(html_text.markdown(m.text))
    parts += [_media(p) for p in content_parts.parts(m) or [] if p.get("type") != "text"]
    for call in m.tool_calls:
        parts.append(
            f"<details><summary>tool call: {html.escape(call.name)}</summary>"
            f"<pre><code>{html_text.highlight(html_text.arguments(call.arguments), 'json')}"
            "</code></pre></details>"
        )
    parts.append("</section>")
    return "".join(parts)


def _media(part: dict[str, Any]) -> str:
    """An image sent as a data: URL inline; anything else by its label, never fetched."""
    found = content_parts.media(part)
    label = html.escape(found.label() if found else "[?]")
    url = found.url if found else None
    if url is not None and url.startswith("data:image/"):
        return (
            f'<figure><img src="{html.escape(url)}" alt="{label}">'
            f"<figcaption>{label}</figcaption></figure>"
        )
    return f'<p class="part">{label}</p>'


def _kind(m: Message) -> str | None:
    kind = m.meta.get("kind")
    return str(kind) if kind in ("summary", "facts") else None


def _kind_note(m: Message) -> str:
    strategy = m.meta.get("strategy")
    how = f" ({strategy})" if isinstance(strategy, str) else ""
    return f"Compression summary{how}: earlier messages were replaced by this text."


def _label(m: Message) -> str:
    if m.role == "tool":
        return f"tool {m.name or ''}".rstrip()
    return m.role


def _byline(shared: SharedConversation) -> str:
    models = sorted({str(m.meta["model"]) for m in shared.messages if m.meta.get("model")})
    stamps = [m.created_at for m in shared.messages if m.created_at]
    when = f"{local_time(min(stamps))} to {local_time(max(stamps))}" if stamps else "no messages"
    return f"{_count(len(shared.messages), 'message')} · {when}" + (
        f" · {', '.join(models)}" if models else ""
    )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


__all__ = ["to_html", "to_markdown"]
