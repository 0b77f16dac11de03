"""A turn as explicit steps (SPEC §1): load, model request n, tool call n, store.

After each step a step checkpoint records the messages so far, the step reached and its
output (when `persistence.automatic`); completion, cancellation or abandonment writes a
tombstone. A process that dies mid-turn leaves the latest step without a tombstone, and
`resume_turn` continues after it, reusing recorded tool results. Chat history is written
once, at the store step; a failed or cancelled turn writes nothing to it (§5.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from koogcli.core import checkpoints as core
from koogcli.core.chat_memory import LoadedPrompt
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import CorruptDocumentError, KoogError, ModelError, TurnCancelledError
from koogcli.core.messages import (
    Message,
    ToolCall,
    assistant,
    for_api,
    new_id,
    system,
    tool_result,
    utc_now,
)
from koogcli.core.messages import user as user_message
from koogcli.core.names import SessionName
from koogcli.core.ports import ModelRequest, ToolOutcome, Usage
from koogcli.services.checkpoints import restore_point
from koogcli.services.context import AppContext

T = TypeVar("T")


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
class _Turn:
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


def live_prompt(ctx: AppContext, override: str | None) -> list[Message]:
    text = override if override is not None else ctx.settings.llm.system_prompt
    return [system(text)] if text else []


def run_turn(ctx: AppContext, request: TurnRequest, events: TurnEvents | None = None) -> TurnResult:
    stored = ctx.history.read(request.session)
    live = live_prompt(ctx, request.system_prompt)
    loaded = _auto_compress(ctx, ctx.memory.prepare(stored, live), events)
    undo = restore_point(
        ctx, request.session, "turn", messages=stored.messages, revision=stored.revision
    )
    stream = ctx.settings.chat.stream if request.stream is None else request.stream
    turn = _Turn(
        ctx,
        request.session,
        new_id(),
        live,
        loaded,
        [],
        request.model or ctx.settings.llm.model,
        ctx.settings.llm.temperature,
        stream,
        undo.id if undo else None,
        events=events or TurnEvents(),
    )
    turn.record(user_message(request.text))
    turn.checkpoint("load", None)
    return _drive(turn)


def _auto_compress(
    ctx: AppContext, loaded: LoadedPrompt, events: TurnEvents | None
) -> LoadedPrompt:
    """compression.auto_after_messages: compress a long history before the model sees it.

    The turn's restore point holds the uncompressed history, so one rollback undoes both.
    """
    from koogcli.services import compression

    settings = ctx.settings.compression
    count = sum(1 for m in loaded.messages if m.role != "system")
    if not settings.auto_after_messages or count <= settings.auto_after_messages:
        return loaded
    strategy = compression.build_strategy(
        settings, compression.CompressRequest(SessionName("auto"))
    )
    compressed, _ = compression.compress_prompt(
        ctx, loaded.messages, strategy, settings.preserve_memory
    )
    if compressed is None:
        return loaded
    if events and events.on_note:
        events.on_note(
            f"compressed the history ({strategy.name}): {len(loaded.messages)} → "
            f"{len(compressed)} messages"
        )
    return LoadedPrompt(compressed, loaded.revision)


def interrupted(ctx: AppContext, session: SessionName) -> Checkpoint | None:
    if not ctx.settings.persistence.enabled:
        return None
    return core.interrupted_turn(ctx.checkpoints.headers(session))


def resume_turn(
    ctx: AppContext, session: SessionName, events: TurnEvents | None = None
) -> TurnResult | None:
    """Finish the session's interrupted turn after its last step; None if there is none."""
    header = interrupted(ctx, session)
    if header is None:
        return None
    step = ctx.checkpoints.get(session, header.id)  # refuses unknown format versions (exit 3)
    d = step.details
    base_count, live_count = _field(d, "base_count", int), _field(d, "live_count", int)
    messages = list(step.messages)
    base = messages[:base_count]
    restore_id = d.get("restore_point")
    turn = _Turn(
        ctx,
        session,
        step.turn_id or new_id(),
        base[:live_count],
        LoadedPrompt(base, _field(d, "base_revision", int)),
        messages[base_count:],
        _field(d, "model", str),
        float(_field(d, "temperature", float)),
        _field(d, "stream", bool),
        restore_id if isinstance(restore_id, str) else None,
        _field(d, "rounds", int),
        events=events or TurnEvents(),
    )
    if step.step == "store":
        _ingest(turn)
        _tombstone(turn, "completed")
        return _result(
            turn, ctx.history.read(session).revision, len(ctx.history.load(session)), step.step
        )
    return _drive(turn, resumed_after=step.step)


def _field(details: dict[str, object], key: str, kind: type[T]) -> T:
    value = details.get(key)
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind):
        raise CorruptDocumentError(
            f"step checkpoint lacks a valid {key!r}; cannot resume",
            hint="abandon the turn with `koog chat --no-resume`",
        )
    return value


def abandon(ctx: AppContext, session: SessionName) -> Checkpoint | None:
    """Give up an interrupted turn; its restore point stays listed."""
    header = interrupted(ctx, session)
    if header is not None:
        ctx.checkpoints.save(_tombstone_for(session, header.turn_id, "abandoned"))
    return header


def _drive(turn: _Turn, resumed_after: str | None = None) -> TurnResult:
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
        _tombstone(turn, "cancelled")
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
    _ingest(turn)
    _tombstone(turn, "completed")
    return _result(turn, committed.revision, len(committed.messages), resumed_after)


def _ingest(turn: _Turn) -> None:
    """Store the messages this turn added in long-term memory (never earlier turns')."""
    from koogcli.services import memory

    memory.ingest_turn(turn.ctx, turn.session, turn.new)


def _pending_calls(new: list[Message]) -> list[ToolCall]:
    """Calls of the latest assistant message that have no result yet, in order."""
    for index in range(len(new) - 1, -1, -1):
        if new[index].role == "assistant":
            answered = {m.tool_call_id for m in new[index + 1 :] if m.role == "tool"}
            return [c for c in new[index].tool_calls if c.id not in answered]
    return []


def _model_step(turn: _Turn) -> None:
    ctx = turn.ctx
    offer_tools = bool(ctx.toolbox.names()) and turn.rounds < ctx.settings.chat.max_tool_rounds
    from koogcli.services import memory

    request = ModelRequest(
        turn.model,
        memory.retrieve(ctx, for_api([*turn.loaded.messages, *turn.new])),
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


def _tool_step(turn: _Turn, call: ToolCall) -> None:
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


def _tombstone_for(session: SessionName, turn_id: str | None, reason: str) -> Checkpoint:
    return Checkpoint(
        id=core.new_checkpoint_id(),
        session=session.value,
        seq=0,
        kind="tombstone",
        created_at=utc_now(),
        turn_id=turn_id,
        reason=reason,
    )


def _tombstone(turn: _Turn, reason: str) -> None:
    settings = turn.ctx.settings.persistence
    if not (settings.enabled and settings.automatic):
        return
    try:
        turn.ctx.checkpoints.save(_tombstone_for(turn.session, turn.turn_id, reason))
        turn.ctx.checkpoints.prune(turn.session, settings.keep_last)
    except KeyboardInterrupt:
        raise
    except KoogError:
        if reason == "completed":
            raise


def _result(turn: _Turn, revision: int, stored: int, resumed_after: str | None) -> TurnResult:
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
