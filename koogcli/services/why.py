"""`koog why`: what shaped a stored reply's request (SPEC §5.17).

A turn records it with the reply (core/why.py) as the request goes out; reading it back
takes the session's transcript, which keeps every reply whatever later compression or
rollback did to the history, so the answer for turn N never changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from koogcli.core import why as core
from koogcli.core.errors import UsageError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.why import Explained, Why
from koogcli.services.budget import context_limit, size_of
from koogcli.services.context import AppContext

if TYPE_CHECKING:
    from koogcli.services.memory import Retrieval
    from koogcli.services.turn_state import TurnState


def record(
    turn: TurnState,
    prompt: Sequence[Message],
    retrieval: Retrieval | None,
    temperature: float | None,
    tools: int,
) -> Why:
    """What shapes the request about to go out: ids and counts only."""
    ctx = turn.ctx
    # As configured or given, before retrieval added anything to it.
    system = "\n".join(m.text for m in turn.live if m.role == "system")
    memory = None
    if retrieval is not None:
        from koogcli.services.memory import resolve_mode

        settings = ctx.settings.long_term_memory.retrieval
        memory = {
            "mode": resolve_mode(ctx, None),
            "namespace": settings.namespace,
            "records": [{"id": h.record.id, "score": round(h.score, 6)} for h in retrieval.hits],
        }
    limit = context_limit(ctx, turn.model)
    # Counting tokens costs time in proportion to the history: only when there is a limit.
    estimate = size_of(ctx, turn.model, prompt, turn.loaded.messages).tokens if limit else None
    return Why(
        model=turn.model,
        temperature=temperature,
        stream=turn.stream,
        tools=tools,
        system_source=turn.system_source,
        system_chars=len(system),
        preprocessors=turn.loaded.trace,
        summary=core.summary_in_effect(turn.loaded.base),
        memory=memory,
        estimate=estimate,
        limit=limit,
        compressed_before=turn.compressed,
        recovered=turn.recovered,
    )


def explain(ctx: AppContext, session: SessionName, turn: int | None = None) -> Explained:
    """The reply of answered turn `turn` (1-based; None: the last) and why it was so."""
    ctx.require_session(session)
    answered: list[tuple[Message, Why]] = []
    last_turn: str | None = None
    for message, turn_id in ctx.transcript.entries(session):
        found = core.of(message) if message.role == "assistant" else None
        if found is None or message.meta.get("cancelled"):
            continue
        if turn_id == last_turn and answered:
            answered[-1] = (message, found)  # a turn's last reply answers it
        else:
            answered.append((message, found))
        last_turn = turn_id
    if not answered:
        raise UsageError(
            f"session {session.value!r} has no reply recorded with what shaped it",
            hint="replies stored by this version of koog have it; ask something first",
        )
    number = len(answered) if turn is None else turn
    if not 1 <= number <= len(answered):
        raise UsageError(
            f"session {session.value!r} has {len(answered)} answered turns; there is no "
            f"turn {number}",
            hint=f"give --turn from 1 to {len(answered)}",
        )
    reply, found = answered[number - 1]
    return Explained(session.value, number, len(answered), reply, found)
