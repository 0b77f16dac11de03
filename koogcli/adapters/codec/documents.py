"""On-disk document shapes, validated with pydantic before they become domain objects.

A history document is `{"format": "koog.chat-history", "version": 1, "session", "revision",
"updated_at", "message_count", "preview", "messages": [...]}`. Messages are written one per
line so the file stays readable and the C JSON encoder does the work. `message_count` and
`preview` (the first user message, cut short) come before the messages, so listings read
the first few hundred bytes instead of the whole document (`read_summary`), and
`history show --last N` reads the last N lines (`read_tail`). Readers that do not know the
two keys ignore them; documents without them are read whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from koogcli.core import bounded_json
from koogcli.core.errors import CorruptDocumentError, UnknownFormatError, UsageError
from koogcli.core.injected import first_prompt
from koogcli.core.messages import Message, new_id, utc_now

HISTORY_FORMAT = "koog.chat-history"
HISTORY_VERSION = 2  # 2: an append log may follow the document (adapters/files/log.py)
EXPORT_VERSION = 1  # a complete document, as every koog reads it
READABLE_VERSIONS = (1, 2)


# Importing pydantic costs about 0.15 s. A command that reads a few messages (`history
# show --last 5`) checks them by hand; the check accepts only what the schema accepts, and
# anything it does not accept goes to pydantic, which says what is wrong.
BY_HAND = 64


def parse_messages(raw: object, source: str) -> list[Message]:
    """Validate untrusted message dicts; errors name the source and the bad field."""
    if isinstance(raw, list) and len(raw) <= BY_HAND and all(map(_plainly_valid, raw)):
        return [Message.from_dict(m) for m in raw]
    from pydantic import ValidationError

    from koogcli.adapters.codec.schema import MESSAGES

    try:
        models = MESSAGES.validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise CorruptDocumentError(
            f"{source}: invalid message at messages.{where}: {err['msg']}"
        ) from exc
    return [Message.from_dict(m) for m in models]


_ROLES = frozenset(("system", "user", "assistant", "tool"))


def _text(value: object, empty: bool = True) -> bool:
    return type(value) is str and (empty or value != "")


def optional_text(value: object) -> bool:
    return value is None or type(value) is str


def _plainly_valid(message: object) -> bool:
    """True only for a message the schema in document_schema.py accepts as it is."""
    if type(message) is not dict:
        return False
    get = message.get
    role = get("role")
    if not (
        _text(get("id"), empty=False)
        and type(role) is str
        and role in _ROLES
        and "content" in message
        and optional_text(message["content"])
        and _text(get("created_at"), empty=False)
        and optional_text(get("tool_call_id"))
        and optional_text(get("name"))
    ):
        return False
    meta = get("meta", {})
    if type(meta) is not dict or not all(type(key) is str for key in meta):
        return False
    calls = get("tool_calls", [])
    return type(calls) is list and all(map(_plain_call, calls))


def _plain_call(call: object) -> bool:
    if type(call) is not dict or "id" not in call or not optional_text(call["id"]):
        return False
    if call.get("type", "function") != "function":
        return False
    function = call.get("function")
    return (
        type(function) is dict
        and _text(function.get("name"), empty=False)
        and _text(function.get("arguments"))
    )


@dataclass(frozen=True)
class HistoryHeader:
    format: str
    version: int
    revision: int
    updated_at: str | None


@dataclass(frozen=True)
class HistorySummary(HistoryHeader):
    message_count: int
    preview: str


def _header_problem(raw: dict[str, object]) -> str | None:
    """What is wrong with a document's header fields, for the error message."""
    revision = raw.get("revision")
    if type(raw.get("format")) is not str:
        return "format: a string is needed"
    if type(raw.get("version")) is not int:
        return "version: a whole number is needed"
    if type(revision) is not int or revision < 0:
        return "revision: a whole number, 0 or more, is needed"
    if not optional_text(raw.get("updated_at")):
        return "updated_at: a string or null is needed"
    return None


def _header(raw: dict[str, Any]) -> HistoryHeader:
    return HistoryHeader(raw["format"], raw["version"], raw["revision"], raw.get("updated_at"))


def parse_history(
    raw: object, path: Path, as_written: bool = False
) -> tuple[HistoryHeader, list[Message]]:
    """`as_written`: the caller knows the document is exactly what koog wrote (by its
    sha256), so its messages are valid by construction and are not checked again."""
    if not isinstance(raw, dict):
        raise CorruptDocumentError(f"{path} is not a koog history document (not a JSON object)")
    problem = _header_problem(raw)
    if problem is not None:
        raise CorruptDocumentError(f"{path} is not a koog history document ({problem})")
    header = _header(raw)
    if header.format != HISTORY_FORMAT or header.version not in READABLE_VERSIONS:
        raise UnknownFormatError(
            f"{path} has format {header.format!r} version {header.version}, "
            f"this koog reads {HISTORY_FORMAT!r} versions 1 and 2",
            hint="use a newer koog; this one will not overwrite the file",
        )
    if "messages" not in raw:
        raise CorruptDocumentError(f"{path} is not a koog history document (it has no messages)")
    if as_written and type(raw["messages"]) is list:
        try:
            return header, [Message.from_dict(m) for m in raw["messages"]]
        except (KeyError, TypeError, AttributeError, ValueError):
            pass  # not as koog writes after all: checked below, and the fault named
    return header, parse_messages(raw["messages"], str(path))


PREVIEW_CHARS = 200
MESSAGES_KEY = b', "messages": ['
SUMMARY_BYTES = 4096  # the header with its preview fits well within this


def dump_history(
    session: str,
    revision: int,
    updated_at: str,
    messages: Sequence[Message],
    summary: bool = True,
) -> str:
    """`summary`: add message_count and preview (the files koog stores; exports leave them
    out, their shape is documented)."""
    fields: dict[str, object] = {
        "format": HISTORY_FORMAT,
        "version": HISTORY_VERSION if summary else EXPORT_VERSION,
        "session": session,
        "revision": revision,
        "updated_at": updated_at,
    }
    if summary:
        first = first_prompt(messages)
        fields["message_count"] = len(messages)
        fields["preview"] = first[:PREVIEW_CHARS]
    head = json.dumps(fields, ensure_ascii=False)
    if not messages:
        return head[:-1] + ', "messages": []}\n'
    body = ",\n".join(json.dumps(m.to_dict(), ensure_ascii=False) for m in messages)
    return head[:-1] + ', "messages": [\n' + body + "\n]}\n"


def read_summary(head: bytes) -> HistorySummary | None:
    """The header of a document from its first bytes; None when they do not hold one koog
    wrote with a summary (an older or hand-made document: read it whole). The messages key
    cannot occur inside a JSON string (its quotes would be escaped), so the first one found
    ends the header."""
    end = head.find(MESSAGES_KEY)
    if end < 0:
        return None
    try:
        raw = json.loads(head[:end] + b"}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or _header_problem(raw) is not None:
        return None
    header, count, preview = _header(raw), raw.get("message_count"), raw.get("preview")
    if header.format != HISTORY_FORMAT or header.version not in READABLE_VERSIONS:
        return None
    if type(count) is not int or count < 0 or type(preview) is not str:
        return None
    return HistorySummary(**vars(header), message_count=count, preview=preview)


def read_tail(handle: BinaryIO, count: int, source: str) -> list[Message] | None:
    """The last `count` messages of an open document written by dump_history (one message
    per line, then `]}`), read from its end; None when it does not have that shape. One
    open file throughout, so a document replaced meanwhile is never half old, half new."""
    handle.seek(0)
    summary = read_summary(handle.read(SUMMARY_BYTES))
    if summary is None:
        return None
    wanted = min(max(count, 0), summary.message_count)
    if wanted == 0:
        return []
    size = handle.seek(0, 2)
    data = b""
    chunk = 64 * 1024
    while True:
        start = max(0, size - len(data) - chunk)
        handle.seek(start)
        data = handle.read(size - len(data) - start) + data
        lines = data.rstrip().split(b"\n")
        if len(lines) > wanted + 1 or start == 0:
            break
        chunk *= 4
    if lines[-1] != b"]}" or len(lines) < wanted + 1:
        return None
    try:
        raw = [json.loads(line.rstrip(b",")) for line in lines[-1 - wanted : -1]]
    except (ValueError, RecursionError):
        return None
    return parse_messages(raw, source)


PENDING_FORMAT = "koog.ingest-pending"


def dump_pending(session: str, messages: Sequence[Message]) -> str:
    """The messages of stored turns waiting for ingestion, as one JSON document."""
    doc = {
        "format": PENDING_FORMAT,
        "version": 1,
        "session": session,
        "messages": [m.to_dict() for m in messages],
    }
    return json.dumps(doc, ensure_ascii=False) + "\n"


def parse_pending(raw: object, source: str) -> list[Message]:
    if not isinstance(raw, dict) or raw.get("format") != PENDING_FORMAT or raw.get("version") != 1:
        raise CorruptDocumentError(f"{source} is not a koog pending-ingestion document")
    return parse_messages(raw.get("messages"), source)


def parse_import(text: str, source: str) -> list[Message]:
    """Messages from an export document, JSON Lines (`history show --format jsonl`), or a
    list of messages, koog's or a plain OpenAI `messages` array (ids and times filled in).
    Not JSON: json.JSONDecodeError; nested past core/bounded_json.py's bound: UsageError."""
    try:
        try:
            raw = bounded_json.loads(text)
        except json.JSONDecodeError:
            lines = [line for line in text.splitlines() if line.strip()]
            if len(lines) < 2:
                raise
            raw = [bounded_json.loads(line) for line in lines]
    except bounded_json.TooDeepError as exc:  # no history koog writes is nested so deep
        raise UsageError(f"{source} holds {exc}") from None
    if isinstance(raw, dict) and "role" in raw and "messages" not in raw:
        raw = [raw]  # JSON Lines of one line: one message, not an export document
    if isinstance(raw, list):
        filled = [
            {"id": new_id(), "created_at": utc_now(), "content": None, **m}
            if isinstance(m, dict)
            else m
            for m in raw
        ]
        return parse_messages(filled, source)
    return parse_history(raw, Path(source))[1]
