"""A turn as explicit steps (SPEC §1): load, model request n, tool call n, store.

After each step a step checkpoint records the messages so far, the step reached and its
output (when `persistence.automatic`); completion, cancellation or abandonment writes a
tombstone. A process that dies mid-turn leaves the latest step without a tombstone, and
`resume_turn` continues after it, reusing recorded tool results. Chat history is written
once, at the store step; a failed or cancelled turn writes nothing to it (§5.2).
"""

from __future__ import annotations

import re
from dataclasses import replace

from koogcli.core import checkpoints as core
from koogcli.core import content_parts
from koogcli.core.chat_memory import LoadedPrompt, merge
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import ContextOverflowError
from koogcli.core.messages import Message, new_id, system
from koogcli.core.messages import user as user_message
from koogcli.core.names import SessionName
from koogcli.core.step_details import StepDetails, owner_of
from koogcli.services import budget
from koogcli.services.budget import live_prompt
from koogcli.services.checkpoints import restore_point
from koogcli.services.compensations import finish_compensations
from koogcli.services.context import AppContext
from koogcli.services.turn import prepare
from koogcli.services.turn.request import CallOptions, TurnEvents, TurnRequest, TurnResult
from koogcli.services.turn.state import TurnState, fail, result, tombstone, tombstone_for
from koogcli.services.turn.steps import after_store, drive


def run_turn(ctx: AppContext, request: TurnRequest, events: TurnEvents | None = None) -> TurnResult:
    if (
        not request.recording.writes or request.held
    ):  # --no-save writes nothing, not even a lock file
        return _run_turn(ctx, request, events)
    with ctx.turn_lock(request.session):
        return _run_turn(ctx, request, events)


def _run_turn(ctx: AppContext, request: TurnRequest, events: TurnEvents | None) -> TurnResult:
    """One turn. A turn the server refuses as too long before any tool ran (nothing has
    happened yet) is compressed and sent once more; any other refusal is final."""
    events = events or TurnEvents()
    if request.recording.writes:
        ctx.keep_reserve()  # room to close this turn even on a full disk
        _finish_rollback(ctx, request.session, events)
    recovering = False
    refused: int | None = None  # the estimated size of the request the server refused
    attempts = 0
    while True:
        turn = _start(ctx, request, events, recovering, refused)
        try:
            return drive(turn)
        except ContextOverflowError as err:
            # A server that names its size teaches it: recovery, and every later turn,
            # plan for it (summaries in chunks that fit).
            if request.client is not None and not request.client.recovers:
                raise _agents_overflow(ctx, turn, err) from err
            budget.learn_limit(ctx, turn.model, err.limit)
            automatic = bool(ctx.settings.compression.auto_at)
            size = budget.size_of(
                ctx, turn.model, [*turn.loaded.messages, *turn.new], turn.loaded.messages
            ).tokens
            # Once more after compressing; again while a server that names no size (Ollama)
            # refuses a request smaller each time, down to three quarters of the last.
            again = not recovering or (
                err.limit is None and refused is not None and size < refused and attempts < 4
            )
            if not again or turn.rounds or not automatic or not turn.loaded.base:
                raise _overflow(ctx, request, turn, err, recovering) from err
            if not recovering:
                events.warn(
                    f"{err.message.rstrip('.')}. Compressing the history and sending the turn again"
                )
            recovering, refused, attempts = True, size, attempts + 1


def _agent_continues(request: TurnRequest) -> bool:
    """A coding agent's request that only brings its tool results: the same prompt's turn
    goes on, so `rollback --latest` takes the prompt back whole, with every edit it made
    (SPEC §6); no restore point of its own."""
    client = request.client
    return (
        client is not None
        and client.agent
        and request.replaced is None
        and bool(request.tail)
        and request.tail[0].role == "tool"
        # A result sent with the user's own words (Claude Code after Esc) starts a prompt.
        and not any(m.role == "user" and _REMINDERS.sub("", m.text).strip() for m in request.tail)
    )


# What an agent adds to a tool result on its own, not the user's words.
_REMINDERS = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


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
    loaded, stored, compressed = prepare.within_budget(
        ctx, request, model, live, events, recovering, refused
    )
    before, reason = (
        (stored, "turn") if request.replaced is None else (request.replaced, "agent compaction")
    )
    undo = (
        restore_point(
            ctx, request.session, reason, messages=before.messages, revision=before.revision
        )
        if request.recording.writes and not _agent_continues(request)
        else None
    )
    stream = ctx.settings.chat.stream if request.stream is None else request.stream
    turn = TurnState(
        ctx=ctx,
        session=request.session,
        turn_id=new_id(),
        live=live,
        loaded=loaded,
        new=[],
        model=model,
        temperature=ctx.settings.llm.temperature,
        stream=stream,
        restore_id=undo.id if undo else None,
        events=events,
        recording=request.recording,
        client=request.client,
        call=request.call,
        compressed=compressed,
        recovered=recovering,
        system_source=_system_source(ctx, request),
    )
    try:
        turn.record_all(request.tail or (_prompt(request),), "load", None)
    except BaseException:
        fail(turn, "failed")
        raise
    return turn


def _prompt(request: TurnRequest) -> Message:
    """The user message of a turn of koog's own: its text, and its media as content parts
    (SPEC §6 "Content parts": kept as a client's are)."""
    message = user_message(request.text)
    media = request.call.parts if request.call is not None else ()
    if not media:
        return message
    parts = [{"type": "text", "text": request.text}, *(dict(p) for p in media)]
    return replace(message, meta={**message.meta, content_parts.KEY: parts})


def _system_source(ctx: AppContext, request: TurnRequest) -> str:
    if request.system_prompt is not None:
        if request.recording.for_client:
            return "the client's system message"
        return "given for this turn"
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
            f"run `koog compress -s {name}` (automatic compression is off: compression.auto_at "
            f"= 0), or `koog rollback -s {name} --latest` to take the last turn back"
        )
    else:
        hint = (
            f"even compressed it was too long; try `koog compress -s {name} --strategy "
            f"last-n`, or `koog rollback -s {name} --latest` to take the last turn back"
        )
    kept = (
        " (the compression before it is kept; `koog rollback --latest` undoes it)"
        if request.recording.writes and recovering and turn.compressed
        else ""  # a compression that changed nothing left nothing to undo
    )
    return ContextOverflowError(
        f"{err.message.rstrip('.')}. koog's estimate: {size.describe()}. The turn was not "
        f"stored{kept}.",
        hint=hint,
    )


def _agents_overflow(
    ctx: AppContext, turn: TurnState, err: ContextOverflowError
) -> ContextOverflowError:
    """An agent's request the upstream refused as too long, in the words the agents act
    on (Anthropic's "prompt is too long: N tokens > M maximum"; the error code is
    `context_length_exceeded` in OpenAI's shape), so the agent compacts. Nothing is
    learned: the agent's compaction is the remedy, and other sessions keep their budgets."""
    size = budget.size_of(ctx, turn.model, [*turn.loaded.messages, *turn.new], turn.loaded.messages)
    limit = err.limit or size.limit
    figures = f": {size.tokens} tokens > {limit} maximum" if limit else ""
    error = ContextOverflowError(
        f"prompt is too long{figures} ({err.message.rstrip('.')})",
        hint="the agent compacts its conversation and sends it again",
    )
    error.limit = err.limit
    return error


def _finish_rollback(ctx: AppContext, session: SessionName, events: TurnEvents) -> None:
    """A rollback killed halfway left compensations: the next command on the session runs
    them before anything else (each exactly once)."""
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
    ctx: AppContext,
    session: SessionName,
    events: TurnEvents | None = None,
    only: str | None = None,
) -> TurnResult | None:
    """Finish the session's interrupted turn after its last step; None if there is none
    (or, with `only`, when the interrupted turn found under the lock is another one).

    It runs holding the session's turn lock exclusively, and looks again once it has it:
    two resumes, or a resume beside a live turn, never run one turn twice."""
    with ctx.turn_lock(session, exclusive=True):
        return _resume_turn(ctx, session, events, only)


def _resume_turn(
    ctx: AppContext, session: SessionName, events: TurnEvents | None, only: str | None
) -> TurnResult | None:
    header = interrupted(ctx, session)
    if header is None or (only is not None and header.id != only):
        return None
    step = ctx.checkpoints.get(session, header.id)  # refuses unknown format versions (exit 3)
    d = StepDetails.from_dict(step.details)
    messages = list(step.messages)
    history, new = messages[: d.base_count], messages[d.base_count :]
    live = [system(text) for text in d.system_prompt]
    turn = TurnState(
        ctx=ctx,
        session=session,
        turn_id=step.turn_id or new_id(),
        live=live,
        loaded=LoadedPrompt(merge(live, history), d.base_revision, history),
        new=new,
        model=d.model,
        temperature=d.temperature,
        stream=d.stream,
        restore_id=d.restore_point,
        rounds=d.rounds,
        events=events or TurnEvents(),
        written=list(new),
        # -o and --schema as the interrupted turn had them (its media are in its messages)
        call=CallOptions(d.options, d.schema) if d.options or d.schema is not None else None,
    )
    if _stored(ctx, session, step):
        if step.step == "ingest":
            tombstone(turn, "completed")
        else:
            after_store(turn)
        stored = ctx.history.read(session)
        return result(turn, stored.revision, len(stored.messages), step.step)
    return drive(turn, resumed_after=step.step)


def _stored(ctx: AppContext, session: SessionName, step: Checkpoint) -> bool:
    """Whether an interrupted turn's store landed though its later marks did not (the disk
    filled up after it, or a kill before the `store` mark): its new messages are in the
    history, or were when a later change (a rollback, a compression) took a restore point
    of it. Such a turn is never stored again."""
    if step.step in ("store", "ingest"):
        return True
    new = {m.id for m in step.messages[StepDetails.from_dict(step.details).base_count :]}
    if not new:
        return False
    if new <= {m.id for m in ctx.history.read(session).messages}:
        return True
    later = [
        c
        for c in ctx.checkpoints.headers(session)
        if c.kind == "restore" and c.seq > step.seq and c.readable
    ]
    return any(new <= {m.id for m in ctx.checkpoints.get(session, c.id).messages} for c in later)


def close_stored(ctx: AppContext, session: SessionName, events: TurnEvents | None = None) -> bool:
    """A turn whose history was stored is no interrupted turn, whatever marks it lacks:
    its closing steps (ingestion, its tombstone) run now, quietly. True when one was."""
    header = interrupted(ctx, session)
    return header is not None and _close_if_stored(ctx, session, header, events)


def unfinished(
    ctx: AppContext, session: SessionName, events: TurnEvents | None = None
) -> Checkpoint | None:
    """The interrupted turn to report or resume, in one look: one whose history was stored
    is closed first (close_stored) and is none."""
    header = interrupted(ctx, session)
    if header is None or _close_if_stored(ctx, session, header, events):
        return None
    return header


def _close_if_stored(
    ctx: AppContext, session: SessionName, header: Checkpoint, events: TurnEvents | None
) -> bool:
    if not _stored(ctx, session, ctx.checkpoints.get(session, header.id)):
        return False
    return resume_turn(ctx, session, events, only=header.id) is not None


def abandon(ctx: AppContext, session: SessionName) -> Checkpoint | None:
    """Give up an interrupted turn; its restore point stays listed."""
    header = interrupted(ctx, session)
    if header is not None:
        ctx.checkpoints.save(tombstone_for(session, header.turn_id, "abandoned"))
    return header
