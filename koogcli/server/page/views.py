"""What the page's templates show, made from the services' values: plain dicts of text
(the templates escape it) and of HTML made here from stored text by ui/html_text.py (which
escapes it). Nothing stored reaches the page any other way."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from koogcli.core import content_parts
from koogcli.core.agent_edits import EDITS_KEY
from koogcli.core.archive import TITLES, injected, prompt_text
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.found import Found
from koogcli.core.memory import MemoryRecord
from koogcli.core.messages import REASONING_KEY, Message, local_time
from koogcli.core.ports import SessionInfo
from koogcli.core.usage import Usage
from koogcli.core.why import Explained, sent_records
from koogcli.services.session_view import SessionView
from koogcli.ui import html_text

AGENTS = {"claude": "Claude Code", "codex": "Codex", "opencode": "opencode"}
_LONG_SYSTEM = 600  # characters: an agent's system prompt is folded
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def source_of(name: str, tool: str | None, prefixes: Mapping[str, str]) -> tuple[str, str]:
    """(filter key, words): `koog`, an agent through serve, or a tool's imported store."""
    if tool is not None:
        return tool, f"{TITLES.get(tool, tool)} · imported"
    for client, prefix in prefixes.items():
        if name.startswith(prefix):
            return "agent", f"{AGENTS.get(client, client)} · through serve"
    return "koog", "koog"


def session_rows(found: Iterable[SessionInfo], prefixes: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for s in found:
        key, words = source_of(s.name, s.source.tool if s.source else None, prefixes)
        rows.append(
            {
                "name": s.name,
                "source": key,
                "source_words": words,
                "folder": (s.source.cwd if s.source else None) or "",
                "messages": s.messages,
                "updated": local_time(s.updated_at) if s.updated_at else "",
                "updated_at": s.updated_at or "",
                "preview": _clipped(s.preview, 160),
                "forked_from": s.forked_from,
                "problem": s.problem,
            }
        )
    return rows


def found_rows(found: Sequence[Found]) -> list[dict[str, Any]]:
    return [
        {
            "session": f.session,
            "turn": f.turn,
            "role": f.message.role,
            "anchor": f"m-{f.message.id}",  # on the page of every message (?all=1)
            "when": local_time(f.message.created_at),
            "line": marked(_clipped(f.line, 240), f.terms),
        }
        for f in found
    ]


def marked(text: str, terms: Sequence[str]) -> str:
    """`text` escaped, each of the words (case aside) in `<mark>`."""
    from koogcli.ui.found_views import words_pattern

    pattern = words_pattern(terms)
    if pattern is None:
        return html.escape(text)
    out, at = [], 0
    for hit in pattern.finditer(text):
        out += [html.escape(text[at : hit.start()]), f"<mark>{html.escape(hit.group(0))}</mark>"]
        at = hit.end()
    return "".join([*out, html.escape(text[at:])])


def turns(view: SessionView, start: int = 0) -> list[dict[str, Any]]:
    """Each message from `start` on as a person reads it, a reply with what shaped it."""
    out = []
    for index, m in enumerate(view.messages[start:], start):
        found = view.explained.get(m.id)
        said, added = _said(m)
        out.append(
            {
                "id": m.id,
                "index": index,
                "role": m.role,
                "who": f"tool {m.name}" if m.role == "tool" and m.name else m.role,
                "when": local_time(m.created_at),
                "created_at": m.created_at,
                "summary": m.meta.get("kind") in ("summary", "facts"),
                "body": "" if m.role == "tool" else html_text.markdown(said),
                "added": added,
                "chars": len(m.text),
                "folded": m.role == "system" and len(m.text) > _LONG_SYSTEM,
                "result": m.text if m.role == "tool" else None,
                "thinking": _thinking(m),
                "calls": [_call(c) for c in m.tool_calls],
                "edits": _edits(m),
                "parts": _parts(m, index),
                "model": str(m.meta.get("model") or ""),
                "why": _why(found) if found is not None else None,
            }
        )
    return out


def _said(m: Message) -> tuple[str, list[str]]:
    """A prompt as the person typed it, and the context an agent wrapped around it."""
    if m.role != "user":
        return m.text, []
    added = injected(m.text)
    return (prompt_text(m.text), added) if added else (m.text, [])


def _thinking(m: Message) -> str | None:
    said = m.meta.get(REASONING_KEY)
    return said if isinstance(said, str) and said.strip() else None


def _call(call: Any) -> dict[str, Any]:
    return {
        "name": call.name,
        "arguments": html_text.highlight(html_text.arguments(call.arguments), "json"),
    }


def _edits(m: Message) -> list[str]:
    edits = m.meta.get(EDITS_KEY)
    return [str(e) for e in edits] if isinstance(edits, list) else []


def _parts(m: Message, index: int) -> list[dict[str, Any]]:
    """Images sent as bytes are shown (served by the page itself); other parts by label."""
    out = []
    for number, part in enumerate(content_parts.parts(m) or []):
        found = content_parts.media(part)
        if found is None:
            continue
        shown = found.kind == "image" and found.mime in _IMAGE_TYPES and found.url is not None
        out.append({"label": found.label(), "number": number, "image": shown})
    return out


def image_of(m: Message, number: int) -> tuple[str, bytes] | None:
    """The bytes of an image part a client sent as a data: URL (only raster images)."""
    import base64
    import binascii

    given = content_parts.parts(m) or []
    if not 0 <= number < len(given):
        return None
    found = content_parts.media(given[number])
    if found is None or found.mime not in _IMAGE_TYPES or not found.url:
        return None
    head, _, data = found.url.partition(",")
    if not head.endswith(";base64"):
        return None
    try:
        return found.mime, base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None


def _why(found: Explained) -> dict[str, Any]:
    from koogcli.ui.views import why_lines

    w, usage = found.why, Usage.from_dict(found.reply.meta.get("usage"))
    said = [f"turn {found.turn}", w.model]
    if usage is not None and usage.prompt_tokens is not None:
        said.append(f"{usage.prompt_tokens:,} in · {usage.completion_tokens or 0:,} out")
        if usage.cached_tokens is not None and usage.prompt_tokens:
            said.append(f"{usage.cached_tokens / usage.prompt_tokens:.0%} from cache")
    sent = sent_records(w)
    if sent:
        said.append(f"{len(sent)} memory record{'s' if len(sent) != 1 else ''}")
    if found.rolled_back:
        said.append("rolled back")
    records = [
        {
            "id": str(r["id"]),
            "score": f"{float(r['score']):.3f}",
            "text": found.record_texts.get(str(r["id"])),
            "question": found.question_texts.get(str(r.get("question"))),
        }
        for r in sent
    ]
    return {
        "headline": " · ".join(said),
        "lines": why_lines(found),
        "records": records,
        "edits": list(found.edits),
    }


def points(view: SessionView) -> list[dict[str, Any]]:
    return [_point(c, view.point_files.get(c.id, []), view.messages) for c in view.points]


def _point(c: Checkpoint, files: list[str], messages: Sequence[Message]) -> dict[str, Any]:
    """A restore point, named by what came after it where that is still in the history:
    `before “And to production?”`."""
    from koogcli.ui.views import checkpoint_kind

    what = checkpoint_kind(c) + (f": {c.label}" if c.label else "")
    count = c.message_count or len(c.messages)
    after = next((m for m in messages[count:] if m.role != "system"), None)
    if c.kind == "restore" and not c.manual and after is not None and after.role == "user":
        what = f"before “{_clipped(prompt_text(after.text), 60)}”"
    return {
        "id": c.id,
        "short": c.id[:8],
        "when": local_time(c.created_at),
        "what": what,
        "messages": count,
        "files": files,
        "readable": c.readable,
    }


def records(
    found: Iterable[MemoryRecord], scores: Mapping[str, float] | None = None
) -> list[dict[str, Any]]:
    from koogcli.services.memory import origin

    out = []
    for r in found:
        session, message = origin(r)
        out.append(
            {
                "id": r.id,
                "short": r.id[:8],
                "namespace": r.namespace,
                "text": r.content,
                "when": local_time(r.created_at),
                "session": session,
                "anchor": f"m-{message}" if message else "",
                "score": f"{scores[r.id]:.3f}" if scores and r.id in scores else None,
                "metadata": {str(k): str(v) for k, v in r.metadata.items()},
            }
        )
    return out


def _clipped(text: str, width: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"
