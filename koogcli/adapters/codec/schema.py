"""The pydantic shapes of stored messages and checkpoint documents,
imported only where many messages or a whole document are validated (pydantic takes about
0.15 s to import; listings and short reads check by hand, see documents.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field, TypeAdapter
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12


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


MESSAGES = TypeAdapter(list[MessageDict])
