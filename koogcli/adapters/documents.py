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
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from koogcli.core.errors import CorruptDocumentError, UnknownFormatError
from koogcli.core.messages import Message

HISTORY_FORMAT = "koog.chat-history"
HISTORY_VERSION = 2  # 2: an append log may follow the document (adapters/history_log.py)
EXPORT_VERSION = 1  # a complete document, as every koog reads it
READABLE_VERSIONS = (1, 2)


# TypedDicts rather than models: pydantic validates 10,000 messages of these in a few
# milliseconds and hands back plain dicts, where model instances cost ten times more.
class FunctionDict(TypedDict):
    name: Annotated[str, Field(min_length=1)]
    arguments: str


class ToolCallDict(TypedDict):
    id: str | None
    type: NotRequired[Literal["function"]]
    function: FunctionDict


class MessageDict(TypedDict):
    id: Annotated[str, Field(min_length=1)]
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    created_at: Annotated[str, Field(min_length=1)]
    tool_calls: NotRequired[list[ToolCallDict]]
    tool_call_id: NotRequired[str | None]
    name: NotRequired[str | None]
    meta: NotRequired[dict[str, Any]]


_MESSAGES = TypeAdapter(list[MessageDict])


class HistoryHeader(BaseModel):
    model_config = ConfigDict(extra="ignore")
    format: str
    version: int
    revision: int = Field(ge=0)
    updated_at: str | None = None


def parse_messages(raw: object, source: str) -> list[Message]:
    """Validate untrusted message dicts; errors name the source and the bad field."""
    try:
        models = _MESSAGES.validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise CorruptDocumentError(
            f"{source}: invalid message at messages.{where}: {err['msg']}"
        ) from exc
    return [Message.from_dict(dict(m)) for m in models]


def parse_history(raw: object, path: Path) -> tuple[HistoryHeader, list[Message]]:
    if not isinstance(raw, dict):
        raise CorruptDocumentError(f"{path} is not a koog history document (not a JSON object)")
    try:
        header = HistoryHeader.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CorruptDocumentError(
            f"{path} is not a koog history document ({'.'.join(map(str, err['loc']))}: {err['msg']})"
        ) from exc
    if header.format != HISTORY_FORMAT or header.version not in READABLE_VERSIONS:
        raise UnknownFormatError(
            f"{path} has format {header.format!r} version {header.version}, "
            f"this koog reads {HISTORY_FORMAT!r} versions 1 and 2",
            hint="use a newer koog; this one will not overwrite the file",
        )
    if "messages" not in raw:
        raise CorruptDocumentError(f"{path} is not a koog history document (it has no messages)")
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
        first = next((m.text for m in messages if m.role == "user"), "")
        fields["message_count"] = len(messages)
        fields["preview"] = first[:PREVIEW_CHARS]
    head = json.dumps(fields, ensure_ascii=False)
    if not messages:
        return head[:-1] + ', "messages": []}\n'
    body = ",\n".join(json.dumps(m.to_dict(), ensure_ascii=False) for m in messages)
    return head[:-1] + ', "messages": [\n' + body + "\n]}\n"


class HistorySummary(HistoryHeader):
    message_count: int = Field(ge=0)
    preview: str


def read_summary(head: bytes) -> HistorySummary | None:
    """The header of a document from its first bytes; None when they do not hold one koog
    wrote with a summary (an older or hand-made document: read it whole). The messages key
    cannot occur inside a JSON string (its quotes would be escaped), so the first one found
    ends the header."""
    end = head.find(MESSAGES_KEY)
    if end < 0:
        return None
    try:
        summary = HistorySummary.model_validate_json(head[:end] + b"}")
    except ValidationError:
        return None
    if summary.format != HISTORY_FORMAT or summary.version not in READABLE_VERSIONS:
        return None
    return summary


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
