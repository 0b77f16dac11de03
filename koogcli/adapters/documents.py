"""On-disk document shapes, validated with pydantic before they become domain objects.

A history document is `{"format": "koog.chat-history", "version": 1, "session", "revision",
"updated_at", "messages": [...]}`. Messages are written one per line so the file stays
readable and the C JSON encoder does the work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from koogcli.core.errors import CorruptDocumentError, UnknownFormatError
from koogcli.core.messages import Message

HISTORY_FORMAT = "koog.chat-history"
HISTORY_VERSION = 1


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
    if header.format != HISTORY_FORMAT or header.version != HISTORY_VERSION:
        raise UnknownFormatError(
            f"{path} has format {header.format!r} version {header.version}, "
            f"this koog reads {HISTORY_FORMAT!r} version {HISTORY_VERSION}",
            hint="use a newer koog; this one will not overwrite the file",
        )
    if "messages" not in raw:
        raise CorruptDocumentError(f"{path} is not a koog history document (it has no messages)")
    return header, parse_messages(raw["messages"], str(path))


def dump_history(session: str, revision: int, updated_at: str, messages: Sequence[Message]) -> str:
    head = json.dumps(
        {
            "format": HISTORY_FORMAT,
            "version": HISTORY_VERSION,
            "session": session,
            "revision": revision,
            "updated_at": updated_at,
        },
        ensure_ascii=False,
    )
    if not messages:
        return head[:-1] + ', "messages": []}\n'
    body = ",\n".join(json.dumps(m.to_dict(), ensure_ascii=False) for m in messages)
    return head[:-1] + ', "messages": [\n' + body + "\n]}\n"
