"""The model a turn asks: one request in, one completion out (adapters/model implements
it for each wire protocol; tests use the local test server)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from koogcli.core.messages import Message, ToolCall
from koogcli.core.usage import Usage


@dataclass(frozen=True, slots=True)
class PassThrough:
    """A serve client's request in the upstream's own protocol, sent as it came (SPEC §6):
    its body (koog's additions appended to it by the adapter), the headers it forwards, and
    where the upstream's answer goes as sent (each event's text, or the whole JSON body)."""

    wire: str  # "messages" or "responses"
    body: Mapping[str, object]
    headers: Mapping[str, str] = field(default_factory=dict)
    sink: Callable[[str], None] | None = None


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    messages: Sequence[Message]
    temperature: float | None = None
    stream: bool = True
    tools: Sequence[dict[str, object]] = field(default_factory=tuple)
    # OpenAI's `response_format` (json_schema / json_object); None: plain text.
    response_format: dict[str, object] | None = None
    # Further request fields a client of `koog serve` sent (tool_choice, top_p, seed, ...),
    # passed on as they came.
    extra: Mapping[str, object] = field(default_factory=dict)
    # Set when the client's request goes upstream as it came (an adapter of its protocol).
    passthrough: PassThrough | None = None
    # `koog chat -o KEY VALUE` (besides temperature): request fields the user set, sent in
    # every protocol as given (`max_tokens` and `stop` in the protocol's own names).
    own_options: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    reasoning: str = ""  # the upstream's reasoning text (`reasoning_content`), if it sent any
    # What a native upstream needs sent back with this reply (core/native_replay.py).
    native: Mapping[str, object] | None = None


class ChatModel(Protocol):
    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        """One model request; text deltas are passed to on_delta as they arrive, and
        reasoning deltas to on_reasoning."""
        ...

    def list_models(self) -> list[str]:
        """The models the endpoint offers."""
        ...
