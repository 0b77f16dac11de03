"""A turn as explicit steps (SPEC §1): load, model request n, tool call n, store.

After each step a step checkpoint records the messages so far, the step reached and its
output (when `persistence.automatic`); completion, cancellation or abandonment writes a
tombstone. A process that dies mid-turn leaves the latest step without a tombstone, and
`resume_turn` continues after it, reusing recorded tool results. Chat history is written
once, at the store step; a failed or cancelled turn writes nothing to it (§5.2).
"""

from __future__ import annotations

import time

from koogcli.core import checkpoints as core
from koogcli.core.chat_memory import LoadedPrompt, merge
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import ContextOverflowError
from koogcli.core.messages import Message, new_id, system
from koogcli.core.messages import user as user_message
from koogcli.core.names import SessionName
from koogcli.core.ports import StoredHistory
from koogcli.core.results import CompressResult
from koogcli.core.step_details import StepDetails, owner_of
from koogcli.core.why import trace
from koogcli.services import budget
from koogcli.services.budget import live_prompt
from koogcli.services.checkpoints import restore_point
from koogcli.services.context import AppContext
from koogcli.services.rollback import finish_compensations
from koogcli.services.turn_state import (
    TurnEvents,
    TurnRequest,
    TurnResult,
    TurnState,
    fail,
    result,
    tombstone,
    tombstone_for,
)
from koogcli.services.turn_steps import after_store, drive

__all__ = [
    "TurnEvents",
    "TurnRequest",
    "TurnResult",
    "abandon",
    "interrupted",
    "resume_turn",
    "run_turn",
]


def run_turn(ctx: AppContext, request: TurnRequest, events: TurnEvents | None = None) -> TurnResult:
    if not request.save or request.held:  # --no-save writes nothing, not even a lock file
        return _run_turn(ctx, request, events)
    with ctx.turn_lock(request.session):
        return _run_turn(ctx, request, events)


def _run_turn(ctx: AppContext, request: TurnRequest, events: TurnEvents | None) -> TurnResult:
    """One turn. A turn the server refuses as too long before any tool ran (nothing has
    happened yet) is compressed and sent once more; any other refusal is final."""
    events = events or TurnEvents()
    if request.save:
        ctx.keep_reserve()  # room to close this turn even on a full disk
        _finish_rollback(ctx, request.session, events)
    recovering = False
    refused: int | None = None  # the estimated size of the request the server refused
    while True:
        turn = _start(ctx, request, events, recovering, refused)
        try:
            return drive(turn)
        except ContextOverflowError as err:
            # A server that names its size teaches it: recovery, and every later turn,
            # plan for it (summaries in chunks that fit).
            budget.learn_limit(ctx, turn.model, err.limit)
            automatic = bool(ctx.settings.compression.auto_at)
            if recovering or turn.rounds or not automatic or not turn.loaded.base:
                raise _overflow(ctx, request, turn, err, recovering) from err
            events.warn(
                f"{err.message.rstrip('.')}. Compressing the history and sending the turn again"
            )
            recovering = True
            refused = budget.size_of(
                ctx, turn.model, [*turn.loaded.messages, *turn.new], turn.loaded.messages
            ).tokens


def _start(
    ctx: AppContext,
    request: TurnRequest,
    events: TurnEvents,
    recovering: bool,
    refused: int | None = None,
) -> TurnState:
    """The turn loaded (compressed first when over budget), its restore point taken and
    its user message recorded."""
    model = request.model or ctx.settings.llm.model
    live = live_prompt(ctx, request.system_prompt)
    loaded, stored, compressed = _within_budget(
        ctx, request, model, live, events, recovering, refused
    )
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
        model,
        ctx.settings.llm.temperature,
        stream,
        undo.id if undo else None,
        events=events,
        save=request.save,
        client=request.client,
        compressed=compressed,
        recovered=recovering,
        system_source=_system_source(ctx, request),
    )
    try:
        turn.record_all(request.tail or (user_message(request.text),), "load", None)
    except BaseException:
        fail(turn, "failed")
        raise
    return turn


def _system_source(ctx: AppContext, request: TurnRequest) -> str:
    if request.system_prompt is not None:
        return "the client's system message" if request.client else "given for this turn"
    return ctx.config.provenance.get("llm.system_prompt", "built-in default")


def _overflow(
    ctx: AppContext,
    request: TurnRequest,
    turn: TurnState,
    err: ContextOverflowError,
    recovering: bool,
) -> ContextOverflowError:
    """The refusal as the user should read it: the sizes, and what to run."""
    size = budget.size_of(ctx, turn.model, [*turn.loaded.messages, *turn.new], turn.loaded.messages)
    name = request.session.value
    if turn.rounds:
        hint = (
            f"the turn's tool results made it too long; run `koog compress -s {name}` and ask again"
        )
    elif not turn.loaded.base:
        hint = "the message alone is too long for the model: shorten it or attach less"
    elif not ctx.settings.compression.auto_at:
        hint = (
            f"run `koog compress -s {name}` (automatic compression is off: compression.auto_at = 0)"
        )
    else:
        hint = f"even compressed it was too long; try `koog compress -s {name} --strategy last-n`"
    kept = (
        " (the compression before it is kept; `koog rollback --latest` undoes it)"
        if request.save and recovering
        else ""
    )
    return ContextOverflowError(
        f"{err.message.rstrip('.')}. koog's estimate: {size.describe()}. The turn was not "
        f"stored{kept}.",
        hint=hint,
    )


def _within_budget(
    ctx: AppContext,
    request: TurnRequest,
    model: str,
    live: list[Message],
    events: TurnEvents,
    recovering: bool,
    refused: int | None = None,
) -> tuple[LoadedPrompt, StoredHistory, bool]:
    """The history the turn starts from, compressed first when the configured limits say
    so (compression.auto_after_messages, compression.auto_at) or the server refused the
    turn as too long (`recovering`). A saved turn compresses the stored history, with a
    restore point of its own, so `rollback --latest` undoes the turn and the next rollback
    the compression; --no-save compresses the request only."""
    if request.history is not None and not request.save:
        stored = StoredHistory(list(request.history), 0)
    else:
        stored = request.known or ctx.history.read(request.session)
    loaded = ctx.chat_memory.prepare(stored, live)
    reason = (
        "the server said the request was too long"
        if recovering
        else _compress_reason(ctx, request, model, loaded)
    )
    if reason is None:
        return loaded, stored, False
    summarizer = budget.summary_model(ctx.settings, None, model)
    cut = budget.summary_cut_lately(ctx, summarizer)
    if cut is not None:
        events.warn(
            f"automatic compression skipped: {summarizer} cut off its summaries at "
            f"{time.strftime('%H:%M', time.localtime(cut))} (set [compression] model to one "
            "that can summarise, or run `koog compress`)"
        )
        fitted = _fitted(ctx, request, model, loaded, events, refused)
        return fitted or loaded, stored, False
    try:
        if request.save:
            compressed = _compress(ctx, request, model, events, reason, recovering)
            stored = ctx.history.read(request.session)
            loaded = ctx.chat_memory.prepare(stored, live)
        else:
            loaded, compressed = _compress_request(ctx, model, loaded, events, reason, recovering)
    except ContextOverflowError as err:
        raise ContextOverflowError(
            f"{err.message.rstrip('.')}, in the summary request of the compression before "
            "the turn; nothing was stored",
            hint=f"compress in smaller parts: `koog compress -s {request.session.value} "
            "--strategy chunked`",
        ) from err
    limit = budget.context_limit(ctx, model)
    size = (
        _size(ctx, request, model, loaded) if limit and ctx.settings.compression.auto_at else None
    )
    too_long = size is not None and size.limit is not None and size.tokens > size.limit
    if not compressed and (too_long or recovering):
        fitted = _fitted(ctx, request, model, loaded, events, refused)
        if fitted is not None:
            return fitted, stored, False
    if size is not None and size.limit is not None and size.tokens > size.limit:
        kept = " (the compression is kept; `koog rollback --latest` undoes it)"
        raise ContextOverflowError(
            f"the request would still be {size.describe()} after compression; the turn was "
            f"not sent{kept if request.save else ''}",
            hint=f"run `koog compress -s {request.session.value} --strategy last-n`, or start "
            "a new session",
        )
    return loaded, stored, compressed


def _fitted(
    ctx: AppContext,
    request: TurnRequest,
    model: str,
    loaded: LoadedPrompt,
    events: TurnEvents,
    refused: int | None,
) -> LoadedPrompt | None:
    """No summary could be made: this request sends the newest messages that fit, and
    the stored history stays whole (`koog why` shows what was left out)."""
    tail = list(request.tail or (user_message(request.text),))
    kept = budget.window_to_fit(ctx, model, loaded.messages, tail, refused)
    if kept is None or len(kept) == len(loaded.messages):
        return None
    events.warn(
        f"this turn sends only the newest {len(kept)} of {len(loaded.messages)} messages (what "
        "fits the context); the stored history is unchanged"
    )
    step = trace(budget.FITTED, loaded.messages, kept)
    return LoadedPrompt(kept, loaded.revision, loaded.base, (*loaded.trace, step))


def _size(ctx: AppContext, request: TurnRequest, model: str, loaded: LoadedPrompt) -> budget.Size:
    return budget.size_of(
        ctx,
        model,
        [*loaded.messages, *(request.tail or (user_message(request.text),))],
        loaded.messages,
    )


def _compress_reason(
    ctx: AppContext, request: TurnRequest, model: str, loaded: LoadedPrompt
) -> str | None:
    settings = ctx.settings.compression
    count = sum(1 for m in loaded.messages if m.role != "system")
    if not count:
        return None
    if settings.auto_after_messages and count > settings.auto_after_messages:
        return f"{count} messages, over compression.auto_after_messages = {settings.auto_after_messages}"
    if not settings.auto_at or budget.context_limit(ctx, model) is None:
        return None  # counting tokens costs time in proportion to the history: only if used
    size = _size(ctx, request, model, loaded)
    if budget.over_threshold(ctx.settings, size):
        return f"the request would be {size.describe()}, over compression.auto_at = {settings.auto_at:g}"
    return None


FALLBACK_STRATEGY = "last-n"


def _compress(
    ctx: AppContext,
    request: TurnRequest,
    model: str,
    events: TurnEvents,
    reason: str,
    recovering: bool,
) -> bool:
    """Compress the stored history; False when it could not be and the turn goes on."""
    from koogcli.services import compression  # only when it runs: imports cost every turn

    def run(choice: compression.StrategyChoice) -> CompressResult:
        return compression.compress(
            ctx,
            compression.CompressRequest(
                request.session, choice, chat_model=model, system_prompt=request.system_prompt
            ),
        )

    try:
        done = run(compression.StrategyChoice())
    except compression.NoSummaryError as err:
        _no_summary(ctx, model, err, events, recovering)
        return False
    except compression.CompressionGrewError as err:
        # The configured strategy would lengthen the history: the next one, which keeps
        # only a summary of the last messages; if that grows too, the turn goes uncompressed.
        events.warn(f"{err.message}; trying --strategy {FALLBACK_STRATEGY}")
        try:
            done = run(compression.StrategyChoice(strategy=FALLBACK_STRATEGY))
        except compression.NoSummaryError as again:
            _no_summary(ctx, model, again, events, recovering)
            return False
        except compression.CompressionGrewError as again:
            events.warn(f"{again.message}; the turn goes on uncompressed")
            return False
    for problem in done.problems:
        events.warn(problem)
    if events.on_note:
        what = f"{len(done.before)} → {len(done.after)} messages" if done.changed else "no change"
        events.on_note(f"compressed the history ({done.strategy}, {what}): {reason}")
    return done.changed


def _no_summary(
    ctx: AppContext, model: str, err: Exception, events: TurnEvents, recovering: bool
) -> None:
    """A summary that is none (SPEC §5.19): remembered when the model cut it off, so the
    next automatic compressions do not ask again (budget.summary_cut_lately). A turn the
    server refused as too long goes on (fitted to the context); any other fails, with
    nothing changed."""
    if getattr(err, "cut_off", False):
        budget.learn_summary_cut(ctx, budget.summary_model(ctx.settings, None, model))
    if not recovering:
        raise err
    events.warn(f"{err}; the turn goes on uncompressed")


def _compress_request(
    ctx: AppContext,
    model: str,
    loaded: LoadedPrompt,
    events: TurnEvents,
    reason: str,
    recovering: bool,
) -> tuple[LoadedPrompt, bool]:
    from koogcli.services import compression

    settings = ctx.settings.compression
    try:
        done = compression.compress_prompt(
            ctx,
            loaded.messages,
            compression.build_strategy(settings),
            settings.preserve_memory,
            model=budget.summary_model(ctx.settings, None, model),
        )
    except compression.NoSummaryError as err:
        _no_summary(ctx, model, err, events, recovering)
        return loaded, False
    except compression.CompressionGrewError as err:
        events.warn(f"{err.message}; the turn goes on uncompressed")
        return loaded, False
    if done.messages is None:
        return loaded, False
    if events.on_note:
        events.on_note(
            f"compressed this request's history ({done.strategy}, "
            f"{len(loaded.messages)} → {len(done.messages)} messages): {reason}"
        )
    return LoadedPrompt(done.messages, loaded.revision), True


def _finish_rollback(ctx: AppContext, session: SessionName, events: TurnEvents) -> None:
    """A rollback killed halfway left compensations: the next command on the session runs
    them before anything else (each at most once)."""
    for done in finish_compensations(ctx, session, events.approve):
        line = f"finished an interrupted rollback: {done.describe()}"
        if done.failed:
            events.warn(line)
        elif events.on_note:
            events.on_note(line)


def interrupted(ctx: AppContext, session: SessionName) -> Checkpoint | None:
    """The turn a dead process left mid-way; a turn still running elsewhere is not one."""
    if not ctx.settings.persistence.enabled:
        return None

    def alive(c: Checkpoint) -> bool:
        return ctx.owner_alive(owner_of(c.details))

    if core.interrupted_turn(ctx.checkpoints.headers(session), alive) is None:
        return None
    # Read again: a turn that finished between the first read and the look at its owner
    # has its tombstone stored by now (written before its process ended).
    return core.interrupted_turn(ctx.checkpoints.headers(session), alive)


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
    d = StepDetails.from_dict(step.details)
    messages = list(step.messages)
    history, new = messages[: d.base_count], messages[d.base_count :]
    live = [system(text) for text in d.system_prompt]
    turn = TurnState(
        ctx,
        session,
        step.turn_id or new_id(),
        live,
        LoadedPrompt(merge(live, history), d.base_revision, history),
        new,
        d.model,
        d.temperature,
        d.stream,
        d.restore_point,
        d.rounds,
        events=events or TurnEvents(),
        written=list(new),
    )
    if step.step in ("store", "ingest") or _landed(ctx, session, new):  # stored already
        if step.step == "ingest":
            tombstone(turn, "completed")
        else:
            after_store(turn)
        stored = ctx.history.read(session)
        return result(turn, stored.revision, len(stored.messages), step.step)
    return drive(turn, resumed_after=step.step)


def _landed(ctx: AppContext, session: SessionName, new: list[Message]) -> bool:
    """Whether a turn's new messages are all in the history: its store landed though its
    later marks did not (the disk filled up after it, or a kill before the `store` mark)."""
    if not new:
        return False
    present = {m.id for m in ctx.history.read(session).messages}
    return all(m.id in present for m in new)


def close_stored(ctx: AppContext, session: SessionName, events: TurnEvents | None = None) -> bool:
    """A turn whose history was stored is no interrupted turn, whatever marks it lacks:
    its closing steps (ingestion, its tombstone) run now, quietly. True when one was."""
    header = interrupted(ctx, session)
    if header is None:
        return False
    if header.step not in ("store", "ingest"):
        step = ctx.checkpoints.get(session, header.id)
        base = StepDetails.from_dict(step.details).base_count
        if not _landed(ctx, session, list(step.messages[base:])):
            return False
    resume_turn(ctx, session, events)
    return True


def abandon(ctx: AppContext, session: SessionName) -> Checkpoint | None:
    """Give up an interrupted turn; its restore point stays listed."""
    header = interrupted(ctx, session)
    if header is not None:
        ctx.checkpoints.save(tombstone_for(session, header.turn_id, "abandoned"))
    return header
