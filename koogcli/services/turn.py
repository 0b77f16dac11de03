"""A turn as explicit steps (SPEC §1): load, model request n, tool call n, store.

After each step a step checkpoint records the messages so far, the step reached and its
output (when `persistence.automatic`); completion, cancellation or abandonment writes a
tombstone. A process that dies mid-turn leaves the latest step without a tombstone, and
`resume_turn` continues after it, reusing recorded tool results. Chat history is written
once, at the store step; a failed or cancelled turn writes nothing to it (§5.2).
"""

from __future__ import annotations

from typing import TypeVar

from koogcli.core import checkpoints as core
from koogcli.core.chat_memory import LoadedPrompt, merge
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import CorruptDocumentError
from koogcli.core.messages import Message, new_id, system
from koogcli.core.messages import user as user_message
from koogcli.core.names import SessionName
from koogcli.services.checkpoints import finish_compensations, restore_point
from koogcli.services.context import AppContext
from koogcli.services.turn_steps import (
    TurnEvents,
    TurnRequest,
    TurnResult,
    TurnState,
    after_store,
    drive,
    fail,
    result,
    tombstone,
    tombstone_for,
)

__all__ = [
    "TurnEvents",
    "TurnRequest",
    "TurnResult",
    "abandon",
    "interrupted",
    "resume_turn",
    "run_turn",
]

T = TypeVar("T")


def live_prompt(ctx: AppContext, override: str | None) -> list[Message]:
    text = override if override is not None else ctx.settings.llm.system_prompt
    return [system(text)] if text else []


def run_turn(ctx: AppContext, request: TurnRequest, events: TurnEvents | None = None) -> TurnResult:
    if not request.save:  # --no-save writes nothing at all, not even a lock file
        return _run_turn(ctx, request, events)
    with ctx.turn_lock(request.session):
        return _run_turn(ctx, request, events)


def _run_turn(ctx: AppContext, request: TurnRequest, events: TurnEvents | None) -> TurnResult:
    if request.save:
        _finish_rollback(ctx, request.session, events or TurnEvents())
    stored = ctx.history.read(request.session)
    live = live_prompt(ctx, request.system_prompt)
    loaded = _auto_compress(ctx, ctx.memory.prepare(stored, live), events)
    undo = (
        restore_point(
            ctx, request.session, "turn", messages=stored.messages, revision=stored.revision
        )
        if request.save
        else None
    )
    stream = ctx.settings.chat.stream if request.stream is None else request.stream
    turn = TurnState(
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
        save=request.save,
    )
    try:
        turn.record(user_message(request.text), "load", None)
    except BaseException:
        fail(turn, "failed")
        raise
    return drive(turn)


def _finish_rollback(ctx: AppContext, session: SessionName, events: TurnEvents) -> None:
    """A rollback killed halfway left compensations: the next command on the session runs
    them before anything else (each at most once)."""
    for done in finish_compensations(ctx, session, events.approve):
        outcome = done.outcome
        state = "no compensating tool" if outcome is None else outcome.text
        line = f"finished an interrupted rollback: undo {done.call.name}: {state}"
        if outcome is not None and outcome.error:
            events.warn(line)
        elif events.on_note:
            events.on_note(line)


def _auto_compress(
    ctx: AppContext, loaded: LoadedPrompt, events: TurnEvents | None
) -> LoadedPrompt:
    """compression.auto_after_messages: compress a long history before the model sees it.

    The turn's restore point holds the uncompressed history, so one rollback undoes both.
    """
    settings = ctx.settings.compression
    count = sum(1 for m in loaded.messages if m.role != "system")
    if not settings.auto_after_messages or count <= settings.auto_after_messages:
        return loaded
    from koogcli.services import compression  # only when it runs: imports cost every turn

    strategy = compression.build_strategy(settings)
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
    """The turn a dead process left mid-way; a turn still running elsewhere is not one."""
    if not ctx.settings.persistence.enabled:
        return None
    return core.interrupted_turn(
        ctx.checkpoints.headers(session), lambda c: ctx.owner_alive(c.details.get("owner"))
    )


def resume_turn(
    ctx: AppContext, session: SessionName, events: TurnEvents | None = None
) -> TurnResult | None:
    """Finish the session's interrupted turn after its last step; None if there is none.

    It runs holding the session's turn lock exclusively, and looks again once it has it:
    two resumes, or a resume beside a live turn, never run one turn twice."""
    with ctx.turn_lock(session, exclusive=True):
        return _resume_turn(ctx, session, events)


def _resume_turn(
    ctx: AppContext, session: SessionName, events: TurnEvents | None
) -> TurnResult | None:
    header = interrupted(ctx, session)
    if header is None:
        return None
    step = ctx.checkpoints.get(session, header.id)  # refuses unknown format versions (exit 3)
    d = step.details
    messages = list(step.messages)
    base_count = _field(d, "base_count", int)
    history, new = messages[:base_count], messages[base_count:]
    live = [system(text) for text in _field(d, "system_prompt", list) if isinstance(text, str)]
    restore_id = d.get("restore_point")
    temperature = d.get("temperature")
    turn = TurnState(
        ctx,
        session,
        step.turn_id or new_id(),
        live,
        LoadedPrompt(merge(live, history), _field(d, "base_revision", int), history),
        new,
        _field(d, "model", str),
        float(temperature) if isinstance(temperature, (int, float)) else None,
        _field(d, "stream", bool),
        restore_id if isinstance(restore_id, str) else None,
        _field(d, "rounds", int),
        events=events or TurnEvents(),
        written=list(new),
    )
    if step.step in ("store", "ingest"):  # the history was stored already
        if step.step == "store":
            after_store(turn)
        else:
            tombstone(turn, "completed")
        stored = ctx.history.read(session)
        return result(turn, stored.revision, len(stored.messages), step.step)
    return drive(turn, resumed_after=step.step)


def _field(details: dict[str, object], key: str, kind: type[T]) -> T:
    value = details.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise CorruptDocumentError(
            f"step checkpoint lacks a valid {key!r}; cannot resume",
            hint="abandon the turn with `koog chat --no-resume`",
        )
    return value


def abandon(ctx: AppContext, session: SessionName) -> Checkpoint | None:
    """Give up an interrupted turn; its restore point stays listed."""
    header = interrupted(ctx, session)
    if header is not None:
        ctx.checkpoints.save(tombstone_for(session, header.turn_id, "abandoned"))
    return header
