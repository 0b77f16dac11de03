"""`koog why`: what shaped a stored reply's request (SPEC §5.17).

A turn records it with the reply (core/why.py) as the request goes out; reading it back
takes the session's transcript, which keeps every reply whatever later compression or
rollback did to the history, so the answer for turn N never changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from koogcli.core import why as core
from koogcli.core.errors import UsageError
from koogcli.core.mcp_config import server_of
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.why import Explained, Why
from koogcli.services import turn_numbers
from koogcli.services.budget import context_limit, size_of
from koogcli.services.context import AppContext

if TYPE_CHECKING:
    from koogcli.core.agent_edits import Edit
    from koogcli.services.memory import Retrieval
    from koogcli.services.turn.state import TurnState


def record(
    turn: TurnState,
    prompt: Sequence[Message],
    retrieval: Retrieval | None,
    temperature: float | None,
    tools: Sequence[str],
    passed: bool = False,
) -> Why:
    """What shapes the request about to go out: ids and counts only (and the names of the
    MCP servers' tools offered). `passed`: a client's request passed through as it came,
    which no preprocessor shaped."""
    ctx = turn.ctx
    # koog's MCP tools only; a client's tools in serve are never koog's, whatever their names.
    mine = tools and not turn.recording.for_client
    servers = {s.name for s in ctx.settings.mcp.servers if s.enabled} if mine else set()
    mcp = tuple(n for n in tools if server_of(n, servers))
    # As configured or given, before retrieval added anything to it.
    system = "\n".join(m.text for m in turn.live if m.role == "system")
    memory: dict[str, object] | None = None
    if retrieval is not None:
        from koogcli.services.memory import resolve_mode

        settings = ctx.settings.long_term_memory.retrieval
        memory = {
            "mode": resolve_mode(ctx, None),
            "namespace": settings.namespace,
            "records": [{"id": h.record.id, "score": round(h.score, 6)} for h in retrieval.hits],
        }
        if retrieval.earlier:  # §5 4a: sent again where they were placed on earlier turns
            memory = {**memory, "earlier": retrieval.earlier}
        # Every record the request carries, each with the question it follows.
        memory["sent"] = [
            {"id": h.record.id, "score": round(h.score, 6), "question": question}
            for question, hits in retrieval.carried.items()
            for h in hits
        ]
    limit = context_limit(ctx, turn.model)
    # Counting tokens costs time in proportion to the history: only when there is a limit.
    estimate = size_of(ctx, turn.model, prompt, turn.loaded.messages).tokens if limit else None
    return Why(
        model=turn.model,
        temperature=temperature,
        stream=turn.stream,
        tools=len(tools),
        mcp_tools=mcp,
        system_source=turn.system_source,
        system_chars=len(system),
        preprocessors=() if passed else turn.loaded.trace,
        passed_through=passed,
        summary=core.summary_in_effect(turn.loaded.base),
        memory=memory,
        estimate=estimate,
        limit=limit,
        compressed_before=turn.compressed,
        recovered=turn.recovered,
    )


@dataclass(frozen=True)
class _Replies:
    """A session's transcript read for `why`: its answered turns and what undid them."""

    entries: list[tuple[Message, str]]
    turns: int
    answered: dict[int, tuple[Message, Why]]
    cancelled: tuple[int, ...]
    undone: dict[str, str]  # reply id -> when a rollback took it out


def _replies(ctx: AppContext, session: SessionName) -> _Replies:
    ctx.require_session(session)
    entries = list(ctx.transcript.entries(session))
    numbers = turn_numbers.numbered(entries)
    answered, cancelled = core.replies(
        (m, numbers.of_message[m.id]) for m, _ in entries if m.id in numbers.of_message
    )
    undone: dict[str, str] = {}
    if answered:
        present = {m.id for m in ctx.history.read(session).messages}
        missing = [m.id for m, _ in answered.values() if m.id not in present]
        undone = _rolled_back(ctx, session, missing)
    return _Replies(entries, numbers.turns, answered, cancelled, undone)


def explain(ctx: AppContext, session: SessionName, turn: int | None = None) -> Explained:
    """The reply of turn `turn` (numbered as services/turn_numbers.py does; None: the last
    turn whose reply is in effect) and why it was so; a reply a rollback undid says so, a
    turn cancelled before its reply is never explained as if answered."""
    read = _replies(ctx, session)
    answered = read.answered
    if not answered:
        raise UsageError(
            f"session {session.value!r} has no reply recorded with what shaped it",
            hint="replies stored by this version of koog have it; ask something first",
        )
    if turn is None:
        standing = [n for n, (m, _) in answered.items() if m.id not in read.undone]
        number = max(standing or answered)
    elif turn in answered:
        number = turn
    else:
        raise _unexplained(session, turn, read.turns, sorted(answered), turn in read.cancelled)
    from koogcli.services import agent_files

    return _explained(ctx, session, number, read, agent_files.marks(ctx, session))


def explain_each(ctx: AppContext, session: SessionName) -> dict[str, Explained]:
    """Every stored reply and what shaped it, by the reply's message id (the page shows
    them beside the history): the transcript read once."""
    read = _replies(ctx, session)
    if not read.answered:
        return {}
    from koogcli.services import agent_files

    marks = agent_files.marks(ctx, session)
    return {
        reply.id: _explained(ctx, session, number, read, marks)
        for number, (reply, _) in read.answered.items()
    }


def _explained(
    ctx: AppContext,
    session: SessionName,
    number: int,
    read: _Replies,
    marks: dict[str, list[Edit]],
) -> Explained:
    reply, found = read.answered[number]
    said = [m for m, _ in read.entries]
    records, questions = _sent_records(ctx, found, said)
    return Explained(
        session.value,
        number,
        read.turns,
        reply,
        found,
        read.undone.get(reply.id),
        read.cancelled,
        _edits_before(marks, said, reply),
        records,
        questions,
    )


def _sent_records(
    ctx: AppContext, found: Why, said: list[Message]
) -> tuple[dict[str, str], dict[str, str]]:
    """The text of each record the request carried (those forgotten since have none) and
    of each question they followed, by id: why records ids, never text."""
    sent = core.sent_records(found)
    if not sent:
        return {}, {}
    wanted = {str(r["question"]) for r in sent}
    questions = {m.id: m.text for m in said if m.id in wanted}
    records = ctx.long_term_memory.get_many([str(r["id"]) for r in sent])
    return {i: r.content for i, r in records.items()}, questions


def _edits_before(
    marks: dict[str, list[Edit]], said: list[Message], reply: Message
) -> tuple[str, ...]:
    """The files the edit calls since the reply's prompt changed (an agent's prompt runs
    over several requests: `edited notes.txt (+3 -1)`)."""
    from koogcli.core.agent_edits import shown

    at = next((i for i, m in enumerate(said) if m.id == reply.id), None)
    if not marks or at is None:
        return ()
    start = at
    while start > 0 and said[start - 1].role != "user":
        start -= 1
    calls = [c.id for m in said[start : at + 1] for c in m.tool_calls if c.id]
    return tuple(shown(e) for c in calls for e in marks.get(c, ()))


def _unexplained(
    session: SessionName, turn: int, turns: int, replied: list[int], cancelled: bool
) -> UsageError:
    if cancelled:
        return UsageError(
            f"turn {turn} of {session.value!r} was cancelled before its reply; there is "
            "nothing to explain",
            hint=f"turns with a reply: {_listed(replied)}",
        )
    if 1 <= turn <= turns:
        return UsageError(
            f"turn {turn} of {session.value!r} has no reply with what shaped it (it failed, "
            "was cancelled, or stored no reply)",
            hint=f"turns with one: {_listed(replied)}",
        )
    return UsageError(
        f"session {session.value!r} has {turns} turns; there is no turn {turn}",
        hint=f"give --turn from 1 to {turns}",
    )


def _rolled_back(ctx: AppContext, session: SessionName, missing: list[str]) -> dict[str, str]:
    """Which of the replies `missing` from the history a rollback took out, and when: each
    is in the state a rollback saved before it restored an earlier one (a reply a
    compression replaced is not)."""
    if not missing or not ctx.settings.persistence.enabled:
        return {}
    wanted, found = set(missing), {}
    for header in reversed(ctx.checkpoints.headers(session)):
        if header.reason != "rollback" or header.manual:
            continue
        saved = ctx.checkpoints.get(session, header.id)
        for m in saved.messages:
            if m.id in wanted and m.id not in found:
                found[m.id] = header.created_at
    return found


def _listed(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[-10:]))
    return shown if len(numbers) <= 10 else f"…, {shown}"
