"""A turn asked for by any OpenAI client through `koog serve` (SPEC §6).

Clients resend the whole conversation every time. When the stored history (as koog stored
it: system messages and koog's notes aside) is a prefix of what the client sent, only the
new tail is stored; when they differ, the conversation forks into `NAME~2` (`~3`, …)
holding the common part and the tail, and the original stays as it was. A message is
never stored twice. The turn itself is the CLI's (services/turn.py): system prompt,
preprocessors, budget, compression, retrieval and ingestion apply alike; the client's own
tools are offered and their calls go back to it.

Requests on one session run one after the other (`SessionGate`); a request waiting past
`[serve] session_wait_seconds` is refused as busy. Everything here is safe to call from
many threads at once.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from koogcli.core import wire_marks
from koogcli.core.errors import ConflictError, KoogError, UsageError
from koogcli.core.messages import Message, new_id, utc_now
from koogcli.core.names import SessionName
from koogcli.core.ports import StoredHistory
from koogcli.core.wire_marks import Mark, chain
from koogcli.services.context import AppContext
from koogcli.services.turn import TurnEvents, TurnRequest, TurnResult, run_turn
from koogcli.services.turn_state import ClientOptions

# Never parsed and never a path: a stateless request stores nothing.
STATELESS = SessionName("(stateless)")
_FORK = re.compile(r"~[0-9]+$")


class SessionBusyError(KoogError):
    """Another request on the same session held it past the wait bound."""

    exit_code = 3


@dataclass(frozen=True, slots=True)
class Exchange:
    session: SessionName | None  # None: stateless, nothing stored
    conversation: tuple[Message, ...]  # as the client sent it, system messages included
    client: ClientOptions
    model: str | None = None
    stream: bool = False


@dataclass(frozen=True, slots=True)
class Exchanged:
    result: TurnResult
    session: str | None
    forked_from: str | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    session: SessionName
    tail: tuple[Message, ...]
    forked_from: str | None
    conversation: Mark  # the client's whole conversation, as the reply's mark continues it
    known: StoredHistory | None = None  # the session's history as read to place it


class SessionGate:
    """One request at a time per session, in this process (the turn lock orders processes)."""

    def __init__(self, wait_seconds: float) -> None:
        self.wait_seconds = wait_seconds
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, session: SessionName) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(session.value, (threading.Lock(), 0))
            self._locks[session.value] = (lock, users + 1)
        try:
            if not lock.acquire(timeout=self.wait_seconds):
                raise SessionBusyError(
                    f"session {session.value!r} stayed busy with another request for "
                    f"{self.wait_seconds:g}s",
                    hint="send one request per session at a time, or raise "
                    "[serve] session_wait_seconds",
                )
            try:
                yield
            finally:
                lock.release()
        finally:
            with self._guard:
                lock, users = self._locks[session.value]
                if users == 1:
                    del self._locks[session.value]
                else:
                    self._locks[session.value] = (lock, users - 1)


def exchange(
    ctx: AppContext, gate: SessionGate, request: Exchange, events: TurnEvents | None = None
) -> Exchanged:
    system_prompt, said = split_system(request.conversation)
    if not said:
        raise UsageError("the request holds no message besides system messages")
    if request.session is None:
        base, tail = _split_tail(tuple(map(_stamped, said)))
        turn = TurnRequest(
            STATELESS,
            "",
            request.model,
            system_prompt,
            request.stream,
            save=False,
            tail=tail,
            client=request.client,
            history=base,
        )
        return Exchanged(run_turn(ctx, turn, events), None)
    # One request at a time on a session: in this process (the gate, bounded), and across
    # processes and servers sharing a database (the turn lock, held exclusively).
    with gate.hold(request.session), ctx.turn_lock(request.session, exclusive=True):
        placed = place(ctx, request.session, said)
        turn = TurnRequest(
            placed.session,
            "",
            request.model,
            system_prompt,
            request.stream,
            tail=tuple(map(_stamped, placed.tail)),
            client=replace(request.client, conversation=placed.conversation),
            known=placed.known,
            held=placed.forked_from is None,  # a fork is a session of its own
        )
        result = run_turn(ctx, turn, events)
    return Exchanged(result, placed.session.value, placed.forked_from)


def _stamped(m: Message) -> Message:
    """A message as koog stores it: with an id and a time (a client sends neither)."""
    if m.id and m.created_at:
        return m
    return replace(m, id=m.id or new_id(), created_at=m.created_at or utc_now())


def split_system(conversation: Sequence[Message]) -> tuple[str | None, tuple[Message, ...]]:
    """The client's system messages become the turn's system prompt (never stored)."""
    prompts = [m.text for m in conversation if m.role == "system"]
    rest = tuple(m for m in conversation if m.role != "system")
    return ("\n\n".join(prompts) if prompts else None), rest


def place(ctx: AppContext, session: SessionName, said: Sequence[Message]) -> Placement:
    """Where the client's conversation goes: the session with the new tail, or a fork."""
    known = ctx.history.read(session)
    stored = known.messages
    view = [i for i, m in enumerate(stored) if _comparable(m)]
    sent = ctx.pipeline.redact(list(said))  # stored messages passed the redactors too
    if any(stored[i].meta.get("kind") in ("summary", "facts") for i in view):
        return _place_compressed(ctx, session, known, view, said, sent)
    common = 0
    while common < min(len(view), len(sent)) and _same(stored[view[common]], sent[common]):
        common += 1
    if common == len(view):
        _something_new(session, common, said)
        conversation = _conversation(stored, view[:common], sent)
        return Placement(session, tuple(said[common:]), None, conversation, known)
    cut = _reply_before(said, common)
    keep = stored[: view[cut - 1] + 1] if cut else [m for m in stored if m.role == "system"]
    fork = _fork(ctx, session, keep)
    return Placement(fork, tuple(said[cut:]), session.value, Mark(len(sent), chain(sent)))


def _place_compressed(
    ctx: AppContext,
    session: SessionName,
    known: StoredHistory,
    view: list[int],
    said: Sequence[Message],
    sent: list[Message],
) -> Placement:
    """A compressed history is matched by its newest mark (core/wire_marks.py): the
    client's conversation up to it hashes the same, and what was stored after it equals
    what follows. Diverged, the fork holds the client's own version of the common part."""
    stored = known.messages
    marked = [(i, mark) for i, m in enumerate(stored) if (mark := wire_marks.read(m))]
    if marked:
        last, mark = marked[-1]
        after = [stored[i] for i in view if i > last]
        end = mark.count + len(after)
        if (
            end <= len(sent)
            and all(_same(a, b) for a, b in zip(after, sent[mark.count :], strict=False))
            and chain(sent[: mark.count]) == mark.digest
        ):
            _something_new(session, end, said)
            conversation = Mark(len(sent), chain(sent[mark.count :], mark.digest))
            return Placement(session, tuple(said[end:]), None, conversation, known)
    cut = _reply_before(said, len(said))
    keep = [*(m for m in stored if m.role == "system"), *map(_stamped, sent[:cut])]
    fork = _fork(ctx, session, keep)
    return Placement(fork, tuple(said[cut:]), session.value, Mark(len(sent), chain(sent)))


def _something_new(session: SessionName, known: int, said: Sequence[Message]) -> None:
    if known == len(said):
        raise UsageError(
            f"nothing new to answer: session {session.value!r} already holds all "
            f"{len(said)} messages",
            hint="send the conversation with a new user message (or tool results)",
        )


def _reply_before(said: Sequence[Message], common: int) -> int:
    """Where a fork's new tail starts: after the last reply within the common part, and
    never at the end (a regenerated reply answers the same user message again)."""
    cut = common
    while cut > 0 and (cut == len(said) or said[cut - 1].role != "assistant"):
        cut -= 1
    return cut


def _conversation(stored: list[Message], matched: list[int], sent: list[Message]) -> Mark:
    """The chain over everything the client sent, continued from the newest mark among
    the matched messages (so a long conversation is hashed once, a turn at a time)."""
    for position in range(len(matched) - 1, -1, -1):
        mark = wire_marks.read(stored[matched[position]])
        if mark is not None and mark.count == position + 1:
            return Mark(len(sent), chain(sent[mark.count :], mark.digest))
    return Mark(len(sent), chain(sent))


def _fork(ctx: AppContext, session: SessionName, messages: Sequence[Message]) -> SessionName:
    base = _FORK.sub("", session.value)
    for number in range(2, 10_000):
        suffix = f"~{number}"
        name = SessionName.parse(base[: 64 - len(suffix)] + suffix)
        if ctx.history.exists(name) or ctx.transcript.exists(name):
            continue
        try:
            ctx.history.write(name, messages, expected_revision=0)
        except ConflictError:
            continue  # another request took this name a moment ago
        return name
    raise UsageError(f"session {session.value!r} has too many forks")


def _split_tail(said: Sequence[Message]) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
    """A stateless request: the history, and the messages after the last reply."""
    cut = len(said)
    while cut > 0 and said[cut - 1].role != "assistant":
        cut -= 1
    if cut == len(said):
        raise UsageError("the conversation ends with an assistant message: nothing to answer")
    return tuple(said[:cut]), tuple(said[cut:])


def _comparable(m: Message) -> bool:
    """What the client sees of a stored history: not system prompts, not koog's notes."""
    return m.role != "system" and m.meta.get("kind") not in ("note", "memory")


def _same(stored: Message, sent: Message) -> bool:
    if (stored.role, stored.text, stored.tool_call_id) != (sent.role, sent.text, sent.tool_call_id):
        return False
    mine = [(c.id, c.name, c.arguments) for c in stored.tool_calls]
    return mine == [(c.id, c.name, c.arguments) for c in sent.tool_calls]


def namespaced(ctx: AppContext, namespace: str) -> AppContext:
    """The context with long-term memory's retrieval and ingestion in `namespace`."""
    memory = ctx.settings.long_term_memory
    if memory.retrieval.namespace == namespace and memory.ingestion.namespace == namespace:
        return ctx
    return ctx.with_memory(retrieval={"namespace": namespace}, ingestion={"namespace": namespace})


__all__ = [
    "STATELESS",
    "Exchange",
    "Exchanged",
    "Placement",
    "SessionBusyError",
    "SessionGate",
    "exchange",
    "namespaced",
    "place",
    "split_system",
]
