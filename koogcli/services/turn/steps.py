"""The steps of a turn (its state is state.py, the whole run.py).

Each step records what it produced in the transcript and, with automatic persistence, in
a step checkpoint: a model request (`model:N`), a tool call (`tool:N.K`), the store.
A turn that fails (API error, cancel, any error before its store) is closed at once: a
`failed`/`cancelled` tombstone and no restore point left behind (§5.10). Only a turn whose
process died stays open for resume. What is written to files passes the redact
preprocessors first; the request of the turn in progress is sent as typed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from koogcli.core import native_replay, wire_marks
from koogcli.core import why as why_core
from koogcli.core.errors import KoogError, ResponseFormatError, StorageError, TurnCancelledError
from koogcli.core.messages import (
    CLIENT_TOOLS,
    CUT_REASONS,
    FINISH_KEY,
    NOT_RUN,
    REASONING_KEY,
    TOOL_EFFECTS,
    Message,
    ToolCall,
    assistant,
    clients_calls,
    tool_result,
)
from koogcli.core.messages import user as user_message
from koogcli.core.structured import OPTIONS_KEY, SCHEMA_KEY
from koogcli.core.tokens import parts
from koogcli.core.tool_ids import identify
from koogcli.core.tool_ports import ToolOutcome
from koogcli.core.wire_marks import Mark, chain
from koogcli.services import agent_files, interrupts, tool_identity
from koogcli.services.budget import context_limit

if TYPE_CHECKING:
    pass


from koogcli.services.turn import upstream_request
from koogcli.services.turn.request import RequestInfo, TurnAbandonedError, TurnResult
from koogcli.services.turn.state import (
    TurnState,
    closed_with_room,
    fail,
    koogs_calls_that_ran,
    result,
    stopped_after_effects,
)


def drive(turn: TurnState, resumed_after: str | None = None) -> TurnResult:
    with interrupts.watched():
        return _drive(turn, resumed_after)


def _drive(turn: TurnState, resumed_after: str | None) -> TurnResult:
    try:
        while True:
            last = turn.new[-1]
            pending = _pending_calls(turn.new)
            if last.role in ("user", "tool") and not pending:
                _model_step(turn)
            elif pending and not turn.recording.for_client:
                _tool_step(turn, pending[0])
            else:
                break  # answered, or calls of the client's own tools: it runs them
        if not turn.recording.writes:
            history = turn.ctx.chat_memory.preview(turn.live, turn.loaded, turn.new)
            return result(turn, turn.loaded.revision, len(history), resumed_after)
        if turn.events.abandoned is not None and turn.events.abandoned():
            raise TurnAbandonedError("the client closed the connection; the turn is not stored")
        with interrupts.deferred(check_first=True) as held:
            committed = turn.ctx.chat_memory.commit(
                turn.session, turn.live, turn.loaded, turn.new, turn.recording.for_client
            )
            turn.log_client_messages()
    except KeyboardInterrupt:
        interrupts.handled()
        fail(turn, "cancelled")
        raise TurnCancelledError("turn cancelled; the session history is unchanged") from None
    except StorageError as err:
        ran = koogs_calls_that_ran(turn) if turn.recording.steps else []
        if ran:
            raise stopped_after_effects(turn, ran, err) from err
        fail(turn, "failed")
        raise
    except Exception:
        fail(turn, "failed")
        raise
    if held.interrupted:
        turn.events.warn("Ctrl-C came while the turn was being stored; it is stored complete")
    after_store(turn)
    return result(turn, committed.revision, len(committed.messages), resumed_after)


def after_store(turn: TurnState) -> None:
    """Ingest, then close the turn. The turn is stored: what fails now is a warning (or,
    with `long_term_memory.on_error = "fail"`, exit 1), never an interrupted turn."""
    with contextlib.suppress(KoogError):  # a missing step mark only means resume re-closes
        turn.checkpoint("store", turn.new[-1].text)
    problem = ingest(turn)
    try:
        with interrupts.deferred():
            closed_with_room(turn, "completed")
    except KoogError as err:
        turn.events.warn(f"the turn is stored, but closing its checkpoints failed: {err.message}")
    if problem is not None and turn.ctx.settings.long_term_memory.on_error == "fail":
        raise problem


def ingest(turn: TurnState) -> KoogError | None:
    """The ingest step: the messages this turn added (and any left pending by an earlier
    failure) become records. A failure keeps them pending and is returned, not raised."""
    if not turn.ctx.settings.long_term_memory.ingestion.enabled:
        return None
    from koogcli.services import memory

    try:
        done = memory.ingest_turn(turn.ctx, turn.session, turn.written)
    except KoogError as err:
        turn.events.warn(f"long-term memory ingestion failed, will retry later: {err.message}")
        return err
    except KeyboardInterrupt:  # the turn is stored: stopping ingestion is not failing it
        turn.events.warn("long-term memory ingestion interrupted, will retry later")
        return None
    if done is not None:
        with contextlib.suppress(KoogError):
            turn.checkpoint("ingest", f"{done.added} records added to {done.namespace}")
    return None


def _pending_calls(new: list[Message]) -> list[ToolCall]:
    """Calls of the latest assistant message that have no result yet, in order (none
    when they are a client's: koog never runs those)."""
    for index in range(len(new) - 1, -1, -1):
        if new[index].role == "assistant":
            if clients_calls(new[index]):
                return []
            answered = {m.tool_call_id for m in new[index + 1 :] if m.role == "tool"}
            return [c for c in new[index].tool_calls if c.id not in answered]
    return []


def _model_step(turn: TurnState) -> None:
    ctx = turn.ctx
    for_client = turn.recording.for_client
    if for_client:
        offer_tools = bool(turn.client_options.tools)
    else:
        offer_tools = bool(ctx.toolbox.names()) and turn.rounds < ctx.settings.chat.max_tool_rounds
    composed = upstream_request.compose(turn, offer_tools)
    retrieval, request = composed.retrieval, composed.request
    if retrieval is not None:  # the retrieve step; its augmentation is for this request only
        if retrieval.marked is not None:  # `after`: the records stay with the question
            turn.amend(retrieval.marked)
        turn.memory_used.extend(hit.record.id for hit in retrieval.hits)
        turn.checkpoint(f"retrieve:{turn.rounds + 1}", f"{len(retrieval.hits)} records")
    produced: list[str] = []

    def collect(delta: str) -> None:
        interrupts.check()
        produced.append(delta)
        if turn.events.on_delta:
            turn.events.on_delta(delta)

    if for_client:  # the server's X-Koog-Context-Tokens: the estimate why counted
        turn.context = composed.context
    if turn.events.on_request:
        turn.events.on_request(
            RequestInfo(
                turn.session.value,
                tuple(dict.fromkeys(turn.memory_used)),
                turn.context,
                turn.compressed,
            )
        )
    if turn.events.on_waiting:
        turn.events.on_waiting(f"waiting for {turn.model}")
    try:
        thinking = turn.events.on_reasoning
        completion = (
            ctx.model().complete(request, collect, thinking)
            if thinking is not None
            else ctx.model().complete(request, collect)
        )
        interrupts.check()
    except KeyboardInterrupt:
        partial = Message(role="assistant", content="".join(produced), meta={"cancelled": True})
        if turn.recording.writes:
            ctx.transcript.append(turn.session, ctx.pipeline.redact([partial]), turn.turn_id)
        raise
    turn.rounds += 1
    turn.finish_reason = completion.finish_reason
    turn.usage = turn.usage.plus(completion.usage) if turn.usage else completion.usage
    taken = tool_identity.taken(
        ctx, turn.session, [*turn.loaded.base, *turn.new], turn.recording.writes
    )
    calls = identify(completion.tool_calls, taken) if offer_tools else ()
    usable = tuple(c for c in calls if c.name.strip())
    # A call without a name is the model's error: never stored (it could not be loaded
    # again), told to the model in the next request of this turn only.
    turn.corrections = (
        [assistant(completion.text), user_message(NAMELESS_CALL)]
        if len(usable) < len(calls)
        else []
    )
    if turn.corrections and not usable:
        return  # ask again; the round counts, so a model that keeps doing it runs out
    schema = turn.call.schema if turn.call is not None else None
    if schema is not None and not usable and not _fits(turn, completion.text, schema):
        return  # asked again, once, with what did not fit
    meta: dict[str, object] = {"model": turn.model, why_core.KEY: composed.why.to_dict()}
    if schema is not None:
        meta[SCHEMA_KEY] = dict(schema)  # `history show --json` and `why` say it
    if turn.call is not None and turn.call.options:
        meta[OPTIONS_KEY] = dict(turn.call.options)  # `-o KEY VALUE`, said the same way
    if completion.finish_reason in CUT_REASONS:
        meta[FINISH_KEY] = completion.finish_reason  # a reply cut short says so where shown
    if completion.reasoning:
        meta[REASONING_KEY] = completion.reasoning  # kept beside the reply, never summarised
    if completion.native is not None:
        meta[native_replay.KEY] = dict(completion.native)  # sent back as it came
    if completion.usage is not None:
        meta["usage"] = completion.usage.to_dict()
        if context_limit(ctx, turn.model) is not None:
            # What koog estimated for the request the usage is for: the pair calibrates
            # later estimates for this model (core/tokens.py). Counting costs time in
            # proportion to the history, so only where a context size makes it matter.
            meta["estimate_known"], meta["estimate"] = parts(request.messages)
    reply = Message(role="assistant", content=completion.text, tool_calls=usable, meta=meta)
    if for_client:
        reply = _client_reply(turn, reply)
        watch = turn.client_options.files
        if watch is not None and reply.tool_calls and turn.recording.writes:
            # Before the agent has the calls (a relay holds them until the turn is stored).
            agent_files.note_calls(ctx, turn.session, reply.tool_calls, watch)
    turn.record(reply, f"model:{turn.rounds}", completion.text)


def _fits(turn: TurnState, text: str, schema: Mapping[str, object]) -> bool:
    """`--schema`: a reply that does not fit is told to the model once (not stored); a
    second that does not fit fails the turn (exit 1, nothing printed or stored)."""
    from koogcli.services import structured_output

    problem = structured_output.problem(text, schema)
    if problem is None:
        return True
    if turn.schema_retried:
        raise ResponseFormatError(
            f"the reply does not fit the schema, after one retry: {problem}",
            hint="nothing was stored; a model that supports structured output may do better",
        )
    turn.schema_retried = True
    told = f"{SCHEMA_MISS} {problem}. Reply again with only a JSON document that fits it."
    turn.corrections = [assistant(text), user_message(told)]
    return False


SCHEMA_MISS = "Error: your reply does not fit the JSON schema you were given:"


def _client_reply(turn: TurnState, reply: Message) -> Message:
    """A reply to a client: its tool calls marked as the client's (never koog's to run or
    undo), the client's own fields kept, and the mark continuing its conversation."""
    client = turn.client_options
    meta = dict(reply.meta)
    if reply.tool_calls:
        meta[CLIENT_TOOLS] = True
    meta.update(client.reply_meta)
    if client.conversation is not None:
        [safe] = turn.ctx.pipeline.redact([replace(reply, meta=meta)])
        base = client.conversation
        meta[wire_marks.KEY] = Mark(base.count + 1, chain([safe], base.digest)).to_dict()
    return replace(reply, meta=meta)


NAMELESS_CALL = (
    "Error: your last answer called a tool without giving its name, so it was not run. "
    "Call a tool by one of its names, or answer in text."
)


def _approved(turn: TurnState, call: ToolCall) -> ToolOutcome | None:
    """None when the call may run; else the refusal the model is told."""
    from koogcli.services import approval

    verdict = approval.decide(turn.ctx, turn.session, call, turn.events.approve)
    if verdict == "run":
        return None
    if verdict == "no terminal":
        return ToolOutcome(
            f"Error: calls of {call.name} need the user's approval and there is no terminal "
            "to ask on (`koog chat --yes` approves them); the call was not made.",
            True,
            ran=False,
        )
    return ToolOutcome(
        f"Error: the user declined this call of {call.name}; it was not made.", True, ran=False
    )


def _tool_step(turn: TurnState, call: ToolCall) -> None:
    interrupts.check()
    if turn.events.on_tool_call:
        turn.events.on_tool_call(call)
    steps = turn.recording.steps and call.id
    receipt = turn.ctx.data.receipt_file(turn.session, call.id) if steps and call.id else None
    # §5.18: a call that returned before a killed koog recorded it is never run again
    outcome = turn.ctx.toolbox.settle(call.name, receipt) if receipt is not None else None
    if outcome is None:
        outcome = _approved(turn, call)
    if outcome is None:
        if turn.events.on_waiting:
            turn.events.on_waiting(f"running {call.name}")
        outcome = turn.ctx.toolbox.call(call.name, call.arguments, receipt)
    if turn.events.on_tool_result:
        turn.events.on_tool_result(call, outcome)
    message = tool_result(call.id, call.name, outcome.text)
    effects = turn.ctx.toolbox.effects(call.name)
    if outcome.error or effects is not None:
        meta: dict[str, object] = {"error": True} if outcome.error else {}
        if not outcome.ran:  # refused before it ran: a rollback has nothing to undo
            meta[NOT_RUN] = True
        if effects is not None:  # what a rollback must know of it (an MCP tool's hints)
            meta[TOOL_EFFECTS] = effects
        message = replace(message, meta={**message.meta, **meta})
    index = len(turn.new) - max(i for i, m in enumerate(turn.new) if m.role == "assistant")
    turn.record(message, f"tool:{turn.rounds}.{index}", outcome.text)
    if receipt is not None:
        turn.ctx.toolbox.forget(receipt)  # the step's checkpoint holds the result now
