"""What a turn is asked (TurnRequest, a serve client's ClientOptions), what it tells as it
runs (TurnEvents) and what it gives back (TurnResult, RequestInfo)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from koogcli.core.agent_edits import Watch
from koogcli.core.errors import KoogError
from koogcli.core.messages import Message, ToolCall
from koogcli.core.model_port import PassThrough
from koogcli.core.names import SessionName
from koogcli.core.ports import StoredHistory, Usage
from koogcli.core.results import Approval
from koogcli.core.tool_ports import ToolOutcome
from koogcli.core.wire_marks import Mark


class TurnAbandonedError(KoogError):
    """The client that asked for the turn closed the connection before it was stored."""


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """A turn asked for by a client of `koog serve`: its own tools (their calls go back to
    it, koog's `[[tools]]` are not offered) and request fields passed on as they came."""

    tools: tuple[dict[str, object], ...] = ()
    temperature: float | None = None
    response_format: dict[str, object] | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    # The client's conversation through the turn's new messages; the reply's mark
    # (core/wire_marks.py) continues it.
    conversation: Mark | None = None
    # Kept on the stored reply (a Responses API response's key: services/stored_responses).
    reply_meta: Mapping[str, object] = field(default_factory=dict)
    # The client's own request, when it goes upstream as it came (SPEC §6).
    passthrough: PassThrough | None = None
    # Whether koog compresses when the request is too long (before it goes, or after the
    # upstream refused it). A coding agent compacts by itself: its overflow goes back to it.
    recover_overflow: bool = True
    # A coding agent's session: the files its edit tools change are journalled
    # (services/agent_files.py).
    files: Watch | None = None
    # A coding agent's own session (its header named it): a request that only brings tool
    # results continues the prompt's turn.
    agent: bool = False

    @property
    def recovers(self) -> bool:
        return self.recover_overflow and self.passthrough is None


@dataclass(frozen=True, slots=True)
class CallOptions:
    """What `koog chat` asks of this call only (SPEC §2 "Pipelines"): model options
    (`-o KEY VALUE`; `temperature` is the request's own, the others request fields passed
    as given), a JSON schema the reply must fit (`--schema`), and content parts of the
    prompt besides its text (`-a` images, PDFs, audio), in chat completions' shape."""

    options: Mapping[str, object] = field(default_factory=dict)
    schema: Mapping[str, object] | None = None
    parts: tuple[Mapping[str, object], ...] = ()


class Recording(Enum):
    """What a turn writes, chosen once from its request (its four modes; SPEC §1, §6)."""

    SESSION = "session"  # koog's own turn: step checkpoints, transcript as it goes, history
    CLIENT = "client"  # a serve client's: history and transcript at the store, no steps
    PREVIEW = "preview"  # --no-save: reads the session, writes nothing at all
    STATELESS = "stateless"  # a serve client's outside any session: writes nothing

    @property
    def writes(self) -> bool:
        """The turn stores what it did (history, transcript, restore point)."""
        return self in (Recording.SESSION, Recording.CLIENT)

    @property
    def steps(self) -> bool:
        """Step checkpoints, receipts and a tombstone: only koog's own turns are resumed
        (a client resends its request instead)."""
        return self is Recording.SESSION

    @property
    def for_client(self) -> bool:
        """A client's turn: its tools are its own (their calls go back to it)."""
        return self in (Recording.CLIENT, Recording.STATELESS)


@dataclass(frozen=True, slots=True)
class TurnRequest:
    session: SessionName
    text: str
    model: str | None = None
    system_prompt: str | None = None
    stream: bool | None = None
    save: bool = True  # False (--no-save): read the session, write nothing at all
    # The messages the turn adds instead of `text` as a user message (a client's new tail:
    # user messages, or results of its own tool calls).
    tail: tuple[Message, ...] = ()
    client: ClientOptions | None = None
    # With save=False: the history the turn starts from instead of the stored one.
    history: tuple[Message, ...] | None = None
    # The stored history as the caller has just read it (a server reads it to place the
    # request); read again when None. A concurrent store is caught at commit either way.
    known: StoredHistory | None = None
    # The history an agent's compaction replaced just before this turn: its restore point
    # holds that one, so one rollback undoes the compaction and the turn.
    replaced: StoredHistory | None = None
    # The caller holds the session's turn lock exclusively (a server placing a request).
    held: bool = False
    call: CallOptions | None = None  # `koog chat`'s -o, --schema and media attachments

    @property
    def recording(self) -> Recording:
        if self.client is not None:
            return Recording.CLIENT if self.save else Recording.STATELESS
        return Recording.SESSION if self.save else Recording.PREVIEW


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What shaped a model request, as it goes out (a server puts it in its headers)."""

    session: str
    memory_used: tuple[str, ...]
    context: str
    compressed: bool


@dataclass
class TurnEvents:
    on_delta: Callable[[str], None] | None = None
    # The upstream's reasoning as it arrives (serve passes it on as its protocol does).
    on_reasoning: Callable[[str], None] | None = None
    # A passed-through request's answer as the upstream sent it (serve writes it out).
    on_raw: Callable[[str], None] | None = None
    # A model request went out, or a tool started: nothing to show until the next event.
    on_waiting: Callable[[str], None] | None = None
    on_tool_call: Callable[[ToolCall], None] | None = None
    on_tool_result: Callable[[ToolCall, ToolOutcome], None] | None = None
    on_note: Callable[[str], None] | None = None
    on_warning: Callable[[str], None] | None = None
    on_request: Callable[[RequestInfo], None] | None = None
    # Asks the user about a call of a tool that needs approval; None: no terminal to ask on.
    approve: Callable[[ToolCall], Approval] | None = None
    # True once whoever asked for the turn is gone (a server's client that disconnected):
    # the turn then fails before it is stored.
    abandoned: Callable[[], bool] | None = None

    def warn(self, text: str) -> None:
        if self.on_warning:
            self.on_warning(text)
        elif self.on_note:
            self.on_note(text)


@dataclass(frozen=True, slots=True)
class TurnResult:
    session: str
    reply: str
    usage: Usage | None
    model: str
    revision: int
    stored_messages: int
    checkpoint: str | None = None
    resumed_after: str | None = None
    # The last message the model sent (its tool calls included), and why it stopped.
    message: Message | None = None
    finish_reason: str | None = None
    # Long-term memory records injected into the turn's requests, by id.
    memory_used: tuple[str, ...] = ()
    # The last request's size against the model's context ("1234/128000", "1234/unknown").
    context: str = ""
    compressed: bool = False
