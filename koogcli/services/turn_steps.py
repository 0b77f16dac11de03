"""The steps of a turn and the state they share (see services/turn.py for the whole).

Each step records what it produced in the transcript and, with automatic persistence, in
a step checkpoint: a model request (`model:N`), a tool call (`tool:N.K`), the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from koogcli.core import checkpoints as core
from koogcli.core.chat_memory import LoadedPrompt
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import KoogError, ModelError, TurnCancelledError
from koogcli.core.messages import (
    Message,
    ToolCall,
    assistant,
    for_api,
    new_id,
    tool_result,
    utc_now,
)
from koogcli.core.names import SessionName
from koogcli.core.ports import ModelRequest, ToolOutcome, Usage
from koogcli.services.context import AppContext


@dataclass(frozen=True, slots=True)
class TurnRequest:
    session: SessionName
    text: str
    model: str | None = None
    system_prompt: str | None = None
    stream: bool | None = None


@dataclass
class TurnEvents:
    on_delta: Callable[[str], None] | None = None
    on_tool_call: Callable[[ToolCall], None] | None = None
    on_tool_result: Callable[[ToolCall, ToolOutcome], None] | None = None
    on_note: Callable[[str], None] | None = None


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


@dataclass
class TurnState:
    """The mutable state of one turn; everything resume needs is in its step checkpoints."""

    ctx: AppContext
    session: SessionName
    turn_id: str
    live: list[Message]
    loaded: LoadedPrompt
    new: list[Message]
    model: str
    temperature: float
    stream: bool
    restore_id: str | None
    rounds: int = 0
    usage: Usage | None = None
    events: TurnEvents = field(default_factory=TurnEvents)

    def checkpoint(self, step: str, output: str | None) -> None:
        if not (self.ctx.settings.persistence.enabled and self.ctx.settings.persistence.automatic):
            return
        details: dict[str, object] = {
            "base_count": len(self.loaded.messages),
            "live_count": len(self.live),
            "base_revision": self.loaded.revision,
            "model": self.model,
            "temperature": self.temperature,
            "stream": self.stream,
            "rounds": self.rounds,
            "restore_point": self.restore_id,
            "tools": self.ctx.toolbox.names(),
        }
        self.ctx.checkpoints.save(
            Checkpoint(
                id=core.new_checkpoint_id(),
                session=self.session.value,
                seq=0,
                kind="step",
                created_at=utc_now(),
                messages=(*self.loaded.messages, *self.new),
                turn_id=self.turn_id,
                step=step,
                output=output,
                details=details,
            )
        )

    def record(self, message: Message) -> None:
        self.new.append(message)
        self.ctx.transcript.append(self.session, [message], self.turn_id)


def drive(turn: TurnState, resumed_after: str | None = None) -> TurnResult:
    try:
        while True:
            last = turn.new[-1]
            pending = _pending_calls(turn.new)
            if last.role in ("user", "tool") and not pending:
                _model_step(turn)
            elif pending:
                _tool_step(turn, pending[0])
            else:
                break
    except KeyboardInterrupt:
        tombstone(turn, "cancelled")
        raise TurnCancelledError("turn cancelled; the session history is unchanged") from None
    except ModelError as err:
        if turn.ctx.settings.persistence.automatic and turn.ctx.settings.persistence.enabled:
            err.hint = (
                err.hint
                or f"`koog chat -s {turn.session.value} --resume` retries from the last step"
            )
        raise
    committed = turn.ctx.memory.commit(turn.session, turn.live, turn.loaded, turn.new)
    turn.checkpoint("store", turn.new[-1].text)
    ingest(turn)
    tombstone(turn, "completed")
    return result(turn, committed.revision, len(committed.messages), resumed_after)


def ingest(turn: TurnState) -> None:
    """The ingest step: the messages this turn added become records (never earlier turns')."""
    from koogcli.services import memory

    done = memory.ingest_turn(turn.ctx, turn.session, turn.new)
    if done is not None:
        turn.checkpoint("ingest", f"{done.added} records added to {done.namespace}")


def _pending_calls(new: list[Message]) -> list[ToolCall]:
    """Calls of the latest assistant message that have no result yet, in order."""
    for index in range(len(new) - 1, -1, -1):
        if new[index].role == "assistant":
            answered = {m.tool_call_id for m in new[index + 1 :] if m.role == "tool"}
            return [c for c in new[index].tool_calls if c.id not in answered]
    return []


def _model_step(turn: TurnState) -> None:
    ctx = turn.ctx
    offer_tools = bool(ctx.toolbox.names()) and turn.rounds < ctx.settings.chat.max_tool_rounds
    from koogcli.services import memory

    prompt = for_api([*turn.loaded.messages, *turn.new])
    retrieval = memory.retrieve(ctx, prompt)
    if retrieval is not None:  # the retrieve step; its augmentation is for this request only
        prompt = retrieval.messages
        turn.checkpoint(f"retrieve:{turn.rounds + 1}", f"{len(retrieval.hits)} records")
    request = ModelRequest(
        turn.model,
        prompt,
        turn.temperature,
        turn.stream,
        ctx.toolbox.specs() if offer_tools else (),
    )
    produced: list[str] = []

    def collect(delta: str) -> None:
        produced.append(delta)
        if turn.events.on_delta:
            turn.events.on_delta(delta)

    try:
        completion = ctx.model().complete(request, collect)
    except KeyboardInterrupt:
        partial = Message(role="assistant", content="".join(produced), meta={"cancelled": True})
        ctx.transcript.append(turn.session, [partial], turn.turn_id)
        raise
    turn.rounds += 1
    turn.usage = _add(turn.usage, completion.usage)
    calls = tuple(_with_id(c) for c in completion.tool_calls) if offer_tools else ()
    turn.record(assistant(completion.text, calls))
    turn.checkpoint(f"model:{turn.rounds}", completion.text)


def _tool_step(turn: TurnState, call: ToolCall) -> None:
    if turn.events.on_tool_call:
        turn.events.on_tool_call(call)
    outcome = turn.ctx.toolbox.call(call.name, call.arguments)
    if turn.events.on_tool_result:
        turn.events.on_tool_result(call, outcome)
    message = tool_result(call.id, call.name, outcome.text)
    if outcome.error:
        message = Message(
            role="tool",
            content=outcome.text,
            tool_call_id=call.id,
            name=call.name,
            meta={"error": True},
        )
    turn.record(message)
    index = len(turn.new) - 1 - max(i for i, m in enumerate(turn.new) if m.role == "assistant")
    turn.checkpoint(f"tool:{turn.rounds}.{index}", outcome.text)


def _with_id(call: ToolCall) -> ToolCall:
    # Results are paired to calls by id; a server that sends none gets one made up.
    return call if call.id else ToolCall(f"call_{new_id()[:12]}", call.name, call.arguments)


def _add(total: Usage | None, more: Usage | None) -> Usage | None:
    if more is None:
        return total
    if total is None:
        return more
    return Usage(
        total.prompt_tokens + more.prompt_tokens,
        total.completion_tokens + more.completion_tokens,
        total.total_tokens + more.total_tokens,
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


def tombstone(turn: TurnState, reason: str) -> None:
    settings = turn.ctx.settings.persistence
    if not (settings.enabled and settings.automatic):
        return
    try:
        turn.ctx.checkpoints.save(tombstone_for(turn.session, turn.turn_id, reason))
        turn.ctx.checkpoints.prune(turn.session, settings.keep_last)
    except KeyboardInterrupt:
        raise
    except KoogError:
        if reason == "completed":
            raise


def result(turn: TurnState, revision: int, stored: int, resumed_after: str | None) -> TurnResult:
    reply = next((m.text for m in reversed(turn.new) if m.role == "assistant"), "")
    return TurnResult(
        turn.session.value,
        reply,
        turn.usage,
        turn.model,
        revision,
        stored,
        turn.restore_id,
        resumed_after,
    )
