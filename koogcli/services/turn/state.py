"""The state of one turn and how it is recorded: the step checkpoints and transcript lines
each step writes, and the tombstone that closes it (steps.py runs the steps, run.py the
whole; request.py is what it was asked)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from koogcli.core import checkpoints as core
from koogcli.core.chat_memory import LoadedPrompt
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import KoogError, StorageError
from koogcli.core.messages import NOT_RUN, Message, ToolCall, clients_calls, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import Usage
from koogcli.core.results import call_text
from koogcli.core.step_details import StepDetails
from koogcli.services import interrupts
from koogcli.services.context import AppContext
from koogcli.services.turn.request import (
    CallOptions,
    ClientOptions,
    Recording,
    TurnEvents,
    TurnResult,
)


@dataclass(kw_only=True)
class TurnState:
    """The mutable state of one turn; everything resume needs is in its step checkpoints."""

    ctx: AppContext
    session: SessionName
    turn_id: str
    live: list[Message]
    loaded: LoadedPrompt
    new: list[Message]
    model: str
    temperature: float | None
    stream: bool
    restore_id: str | None
    rounds: int = 0
    usage: Usage | None = None
    events: TurnEvents = field(default_factory=TurnEvents)
    # `new` as written to files (redacted); `new` itself is what the model is sent.
    written: list[Message] = field(default_factory=list)
    retrieval_failed: bool = False
    # Sent with the next model request only: what the model got wrong in its last answer.
    corrections: list[Message] = field(default_factory=list)
    recording: Recording = Recording.SESSION
    client: ClientOptions | None = None  # a serve client's tools and request fields
    call: CallOptions | None = None  # `koog chat`'s options, schema and media parts
    schema_retried: bool = False  # the reply did not fit the schema once already
    finish_reason: str | None = None
    memory_used: list[str] = field(default_factory=list)
    context: str = ""
    compressed: bool = False
    recovered: bool = False  # sent again, compressed, after the server said too long
    system_source: str = ""  # where the system prompt came from (`koog why`)
    unlogged: list[Message] = field(default_factory=list)  # a client's, until stored
    unsaved: tuple[str, str | None] | None = None  # the step whose checkpoint is being written

    @property
    def client_options(self) -> ClientOptions:
        """A client's turn's tools and fields (a turn of koog's own has the defaults)."""
        return self.client or ClientOptions()

    def checkpoint(self, step: str, output: str | None) -> None:
        settings = self.ctx.settings.persistence
        if not (self.recording.steps and settings.enabled and settings.automatic):
            # A client's turn is never resumed: a client resends it, and nothing of a turn
            # is in the history before its store (its restore point still is taken).
            return
        base = self.loaded.base
        details = StepDetails(
            base_count=len(base),
            base_revision=self.loaded.revision,
            system_prompt=tuple(m.text for m in self.live if m.role == "system"),
            model=self.model,
            temperature=self.temperature,
            stream=self.stream,
            rounds=self.rounds,
            restore_point=self.restore_id,
            owner=self.ctx.turn_owner(),
            # koog's tools, when it offers them (a client's turn in serve never does).
            tools=() if self.recording.for_client else tuple(self.ctx.toolbox.names()),
            options=self.call.options if self.call is not None else {},
            schema=self.call.schema if self.call is not None else None,
        )
        self.ctx.checkpoints.save(
            Checkpoint(
                id=core.new_checkpoint_id(),
                session=self.session.value,
                seq=0,
                kind="step",
                created_at=utc_now(),
                turn_id=self.turn_id,
                step=step,
                output=None if output is None else self.ctx.pipeline.redacts(output),
                details=details.to_dict(),
                messages=(*base, *self.written),
            )
        )

    def amend(self, message: Message) -> None:
        """A message of this turn, changed before it is stored (the records placed after
        its question): the same message, by id, in what is sent and what is written."""
        self.new = [message if m.id == message.id else m for m in self.new]
        [safe] = self.ctx.pipeline.redact([message])
        self.written = [safe if m.id == message.id else m for m in self.written]

    def record(self, message: Message, step: str, output: str | None) -> None:
        """A step's message: checkpointed first, then appended to the transcript, so a
        result visible anywhere is one that resume knows about (no tool runs twice)."""
        self.record_all((message,), step, output)

    def record_all(self, messages: Sequence[Message], step: str, output: str | None) -> None:
        """Messages under one step checkpoint (a client's tail comes as several)."""
        self.new.extend(messages)
        safe = self.ctx.pipeline.redact(list(messages))
        self.written.extend(safe)
        self.unsaved = (step, output)
        self.checkpoint(step, output)
        self.unsaved = None
        if self.recording is Recording.CLIENT:
            # A client resends a failed request: its messages reach the transcript with
            # the turn's store, so a failed attempt leaves nothing there (SPEC §6).
            self.unlogged.extend(safe)
        elif self.recording.writes:
            self.ctx.transcript.append(self.session, safe, self.turn_id)

    def log_client_messages(self) -> None:
        """A client's turn, about to be stored: its messages go to the transcript."""
        if self.unlogged:
            self.ctx.transcript.append(self.session, self.unlogged, self.turn_id)
            self.unlogged = []


def fail(turn: TurnState, reason: str) -> None:
    """Close a failed or cancelled turn: tombstone it and drop its restore point, so it is
    neither offered for resume nor mistaken for a change by `rollback --latest`. Cleanup
    problems must not hide the failure being reported."""
    if not turn.recording.writes:
        return
    with interrupts.deferred(), contextlib.suppress(KoogError):  # never half-closed
        closed_with_room(turn, reason)
        if reason == "failed":  # its prompt stays in the transcript, numbered by no turn
            turn.ctx.transcript.mark_failed(turn.session, turn.turn_id)
        if turn.restore_id and turn.ctx.settings.persistence.enabled:
            turn.ctx.checkpoints.delete(turn.session, turn.restore_id)


def koogs_calls_that_ran(turn: TurnState) -> list[ToolCall]:
    """This turn's calls of koog's own tools that ran: their effects are in the world,
    whatever becomes of the turn."""
    ran = {
        m.tool_call_id
        for m in turn.new
        if m.role == "tool" and m.tool_call_id and not m.meta.get(NOT_RUN)
    }
    return [
        c for m in turn.new if m.role == "assistant" and not clients_calls(m)
        for c in m.tool_calls if c.id in ran
    ]  # fmt: skip


def stopped_after_effects(
    turn: TurnState, ran: Sequence[ToolCall], err: StorageError
) -> StorageError:
    """A storage failure (a full disk) after koog's tools ran: closing the turn as failed
    would leave their effects with nothing recording them. It is left interrupted instead,
    the step being written when it failed written again in the reserve's room (so resume
    never runs a call again), and the error names the calls and the way on."""
    with interrupts.deferred(), contextlib.suppress(KoogError):
        if turn.unsaved is not None:
            turn.ctx.spend_reserve()
            turn.checkpoint(*turn.unsaved)
            turn.unsaved = None
    names = ", ".join(call_text(c) for c in ran)
    return StorageError(
        f"{err.message}; the turn stopped after {names} ran, whose effects stay",
        hint=f"free some space, then `koog chat -s {turn.session.value} --resume` finishes "
        "the turn without running them again",
    )


def tombstone_for(session: SessionName, turn_id: str | None, reason: str) -> Checkpoint:
    return Checkpoint(
        id=core.new_checkpoint_id(),
        session=session.value,
        seq=0,
        kind="tombstone",
        created_at=utc_now(),
        turn_id=turn_id,
        reason=reason,
    )


def closed_with_room(turn: TurnState, reason: str) -> None:
    """The tombstone, even on a full disk: a failed write frees the data dir's reserve and
    tries once more (else the closed turn would read as interrupted to every later command)."""
    try:
        tombstone(turn, reason)
    except KoogError:
        if not turn.ctx.spend_reserve():
            raise
        tombstone(turn, reason)


def tombstone(turn: TurnState, reason: str) -> None:
    settings = turn.ctx.settings.persistence
    if not (settings.enabled and settings.automatic) or not turn.recording.steps:
        return  # a client's turn left no step checkpoints to close
    turn.ctx.checkpoints.save(tombstone_for(turn.session, turn.turn_id, reason))
    turn.ctx.checkpoints.prune(turn.session, settings.keep_last)


def result(turn: TurnState, revision: int, stored: int, resumed_after: str | None) -> TurnResult:
    last = next((m for m in reversed(turn.new) if m.role == "assistant"), None)
    return TurnResult(
        turn.session.value,
        last.text if last is not None else "",
        turn.usage,
        turn.model,
        revision,
        stored,
        turn.restore_id,
        resumed_after,
        message=last,
        finish_reason=turn.finish_reason,
        memory_used=tuple(dict.fromkeys(turn.memory_used)),
        context=turn.context,
        compressed=turn.compressed,
    )
