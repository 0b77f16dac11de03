"""A turn asked for by any OpenAI client through `koog serve` (SPEC §6).

Clients resend the whole conversation every time, under one session name for every
conversation. A session's family is `NAME` and its forks `NAME~2`, `NAME~3`, ...: the
member whose stored history (system messages and koog's notes aside) is the longest
prefix of what the client sent takes the new tail; when none is, the conversation forks
into a new member holding the common part and the tail (`forked_from` recorded), and every
later turn of it continues there. Messages compare by meaning (core/wire_marks.same). A
message is never stored twice; a client's tool calls are marked as the client's. The turn itself is the CLI's (services/turn/run.py): system prompt,
preprocessors, budget, compression, retrieval and ingestion apply alike; the client's own
tools are offered and their calls go back to it.

Requests on one session run one after the other (`SessionGate`); a request waiting past
`[serve] session_wait_seconds` is refused as busy. Everything here is safe to call from
many threads at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from koogcli.core import wire_marks
from koogcli.core.errors import ConflictError, UsageError
from koogcli.core.messages import CLIENT_TOOLS, Message, new_id, utc_now
from koogcli.core.names import SessionName, family_name
from koogcli.core.ports import StoredHistory
from koogcli.core.wire_marks import Mark, chain
from koogcli.services import agent_files
from koogcli.services.context import AppContext
from koogcli.services.turn.request import ClientOptions, TurnEvents, TurnRequest, TurnResult
from koogcli.services.turn.run import run_turn
from koogcli.services.turn.session_gate import SessionBusyError, SessionGate

# Never parsed and never a path: a stateless request stores nothing.
STATELESS = SessionName("(stateless)")


Granted = Callable[[str], bool]


def _everything(name: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Exchange:
    session: SessionName | None  # None: stateless, nothing stored
    conversation: tuple[Message, ...]  # as the client sent it, system messages included
    client: ClientOptions
    model: str | None = None
    stream: bool = False
    # Which session names the client may use (a server token's grant): placement looks
    # at, and forks into, only those.
    granted: Granted = _everything
    # The session came from a coding agent's own session header: a tool-less request
    # under it is a side request (a title), answered statelessly (SPEC §6).
    agent_session: bool = False
    # The agent's own compaction request (told by its shape, core/agent_compaction.py).
    compacts: bool = False

    @property
    def stored(self) -> bool:
        """Whether the turn is stored: a session is named and it is no side request (a
        tool-less request of an agent, or its compaction request)."""
        if self.session is None:
            return False
        if not self.agent_session:
            return True
        return bool(self.client.tools) and not self.compacts


@dataclass(frozen=True, slots=True)
class Exchanged:
    result: TurnResult
    session: str | None
    forked_from: str | None = None
    continued: SessionName | None = None  # placed in this other member of the family


@dataclass(frozen=True, slots=True)
class Placement:
    session: SessionName
    tail: tuple[Message, ...]
    forked_from: str | None
    conversation: Mark  # the client's whole conversation, as the reply's mark continues it
    known: StoredHistory | None = None  # the session's history as read to place it
    continued: SessionName | None = None  # another member of the family than the one named
    # An agent's compaction of the session: the history it replaced (the turn's restore
    # point holds it, so `rollback --latest` undoes the compaction and its turn at once).
    before: StoredHistory | None = None

    @property
    def compacted(self) -> bool:
        return self.before is not None

    @property
    def action(self) -> str:
        """What placement did, in words (serve's access log)."""
        if self.compacted:
            return f"compacted {self.session.value}"
        if self.forked_from is not None:
            return f"forked {self.session.value} from {self.forked_from}"
        if self.continued is not None:
            return f"continued {self.continued.value}"
        return "appended"


def exchange(
    ctx: AppContext,
    gate: SessionGate,
    request: Exchange,
    events: TurnEvents | None = None,
    on_placed: Callable[[Placement], None] | None = None,
) -> Exchanged:
    system_prompt, said = split_system(request.conversation)
    if not said:
        raise UsageError("the request holds no message besides system messages")
    if said[-1].role == "assistant":
        # A prefill: koog would answer with the client's own words and never ask the
        # upstream (a reply continued from it cannot be stored as the conversation the
        # client sends next), so it is refused, stored or not.
        raise UsageError(
            "the conversation ends with an assistant message (a prefill): koog serve answers "
            "a user message or tool results; send the prefill's words in the user message"
        )
    said = tuple(map(_as_client, said))
    watch = request.client.files
    if watch is not None and request.session is not None:
        watch = agent_files.watching(watch, system_prompt, said)
        request = replace(request, client=replace(request.client, files=watch))
    if request.session is not None and request.agent_session and request.compacts:
        family = family_of(request.session, request.granted)
        with gate.hold(family), ctx.turn_lock(family, exclusive=True):
            if watch is not None:
                agent_files.note_results(ctx, request.session, said, watch)
            _keep_what_only_it_carries(ctx, request.session, said[:-1], request.granted)
    if request.session is None or not request.stored:
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
    # One request at a time on a session's family: in this process (the gate, bounded),
    # and across processes and servers sharing a database (the turn lock on the family's
    # name, held exclusively while placing; the turn locks a fork itself).
    family = family_of(request.session, request.granted)
    with gate.hold(family), ctx.turn_lock(family, exclusive=True):
        if watch is not None:  # the results of the edit calls it ran: what they left
            agent_files.note_results(ctx, request.session, said, watch)
        placed = place(ctx, request.session, said, request.granted, request.agent_session)
        if on_placed is not None:
            on_placed(placed)
        turn = TurnRequest(
            placed.session,
            "",
            request.model,
            system_prompt,
            request.stream,
            tail=tuple(map(_stamped, placed.tail)),
            client=replace(request.client, conversation=placed.conversation),
            known=placed.known,
            held=placed.session == family,
            replaced=placed.before,
        )
        result = run_turn(ctx, turn, events)
    return Exchanged(result, placed.session.value, placed.forked_from, placed.continued)


def _stamped(m: Message) -> Message:
    """A message as koog stores it: with an id and a time (a client sends neither)."""
    if m.id and m.created_at:
        return m
    return replace(m, id=m.id or new_id(), created_at=m.created_at or utc_now())


def _as_client(m: Message) -> Message:
    """A client's tool calls are marked as the client's: koog never runs or undoes them."""
    if not m.tool_calls or m.meta.get(CLIENT_TOOLS):
        return m
    return replace(m, meta={**m.meta, CLIENT_TOOLS: True})


def split_system(conversation: Sequence[Message]) -> tuple[str | None, tuple[Message, ...]]:
    """The client's system messages become the turn's system prompt (never stored)."""
    prompts = [m.text for m in conversation if m.role == "system"]
    rest = tuple(m for m in conversation if m.role != "system")
    return ("\n\n".join(prompts) if prompts else None), rest


# A family's name leaves room for a fork's `~99999` within a session name's 64 characters.
FAMILY_MAX = 58


def family_of(session: SessionName, granted: Granted = _everything) -> SessionName:
    """`work~3` belongs to the family of `work`; a name the client may use while it may
    not use its family's (a token granted `proj~1` alone) is a family of its own."""
    base = family_name(session.value)
    if base != session.value and not granted(base):
        base = session.value
    return SessionName(base[:FAMILY_MAX])


def members(
    ctx: AppContext, family: SessionName, session: SessionName, granted: Granted = _everything
) -> list[SessionName]:
    """The family's sessions that exist and the client may use: `NAME` and its forks
    `NAME~2`, `NAME~3`, ... (and the session named, when its name is longer than a
    family's)."""
    found = [n for n in ctx.history.names() if family_name(n) == family.value and granted(n)]
    if session.value not in found and ctx.history.exists(session):
        found.append(session.value)
    return [SessionName(n) for n in found]


@dataclass(frozen=True, slots=True)
class _Fit:
    """How one member of the family fits what the client sent."""

    member: SessionName
    known: StoredHistory
    held: int | None  # messages of the conversation it holds, when it holds only those
    common: int  # messages it shares with the conversation from the start
    conversation: Mark | None  # with `held`: the chain over what was sent
    keep: tuple[Message, ...]  # a fork from it starts with these
    cut: int  # ... and stores the conversation from here on

    @property
    def newest(self) -> str:
        return self.known.updated_at or ""


def place(
    ctx: AppContext,
    session: SessionName,
    said: Sequence[Message],
    granted: Granted = _everything,
    agent: bool = False,
) -> Placement:
    """Where the client's conversation goes (SPEC §6): the member of the session's family
    that holds the longest prefix of it (the newest on a tie) takes the new tail; when no
    member is a prefix, a new fork of the member sharing most holds the common part. Under
    a coding agent's own session header there is one conversation: one no member holds is
    the agent's compaction of it (or its rewind), stored in that member as a compaction."""
    sent = ctx.pipeline.redact(list(said))  # stored messages passed the redactors too
    family = family_of(session, granted)
    found = members(ctx, family, session, granted) or [session]
    fits = [_fit(ctx.history.read(m), m, said, sent) for m in found]
    holding = [f for f in fits if f.held is not None]
    if holding:
        best = max(holding, key=lambda f: (f.held or 0, f.newest))
        held = best.held or 0
        _something_new(best.member, held, said)
        assert best.conversation is not None
        continued = best.member if best.member != session else None
        return Placement(
            best.member, tuple(said[held:]), None, best.conversation, best.known, continued
        )
    source = max(fits, key=lambda f: (f.common, f.newest))
    if agent and ctx.history.exists(source.member):
        return _compacted(ctx, source, said, sent, session)
    fork = _fork(ctx, family, source.keep, granted)
    ctx.storage.origins.record(fork, source.member, len(source.keep))
    tail = tuple(said[source.cut :])
    return Placement(fork, tail, source.member.value, Mark(len(sent), chain(sent)))


def _keep_what_only_it_carries(
    ctx: AppContext, session: SessionName, said: Sequence[Message], granted: Granted
) -> None:
    """A compaction request is no turn, but what first appears in it (a tool's result the
    agent got just before compacting) would otherwise be stored nowhere: the messages it
    holds after what the session holds (tool results) are appended to the session (SPEC
    §6)."""
    sent = ctx.pipeline.redact(list(said))
    family = family_of(session, granted)
    fits = [
        _fit(ctx.history.read(m), m, said, sent) for m in members(ctx, family, session, granted)
    ]
    holding = [f for f in fits if f.held]
    if not holding:
        return
    best = max(holding, key=lambda f: (f.held or 0, f.newest))
    extra = [_stamped(m) for m in sent[best.held or 0 :] if m.role == "tool"]
    if not extra or len(extra) != len(sent) - (best.held or 0):
        return  # only tool results: a prompt comes again after the compaction, a reply
        # would need its turn
    ctx.history.write(
        best.member, [*best.known.messages, *extra], expected_revision=best.known.revision
    )
    ctx.transcript.append(best.member, extra, new_id())


def _compacted(
    ctx: AppContext, fit: _Fit, said: Sequence[Message], sent: list[Message], named: SessionName
) -> Placement:
    """The agent's conversation in its new form replaces the member's history; the turn's
    restore point holds the old one (`koog rollback --latest` brings it back, as after
    `koog compress`). The turn's tail is the newest message (or the tool results the
    request ends with): only it reaches the transcript, so the earlier prompts the agent
    carries into the new form are not stored there again; the rest (the agent's summary,
    the prompts it kept) is the history the next turns continue."""
    known = fit.known
    cut = len(said) - 1  # the newest message, and the tool results before it with it
    while cut > 0 and said[cut - 1].role == "tool" and said[cut].role == "tool":
        cut -= 1
    recorded = [m for m in known.messages if m.role == "system"][-1:]  # the client's latest
    base = [
        *recorded,
        *map(_stamped, said[:cut]),
    ]
    revision = ctx.history.write(fit.member, base, expected_revision=known.revision)
    continued = fit.member if fit.member != named else None
    return Placement(
        fit.member,
        tuple(said[cut:]),
        None,
        Mark(len(sent), chain(sent)),
        StoredHistory(base, revision),
        continued,
        before=known,
    )


def _fit(
    known: StoredHistory, member: SessionName, said: Sequence[Message], sent: list[Message]
) -> _Fit:
    stored = known.messages
    view = [i for i, m in enumerate(stored) if wire_marks.conversational(m)]
    if any(stored[i].meta.get("kind") in ("summary", "facts") for i in view):
        return _fit_compressed(known, member, view, said, sent)
    common = 0
    same = wire_marks.same
    for index, resent in zip(view, sent, strict=False):  # the shorter ends it
        if not same(stored[index], resent):
            break
        common += 1
    cut = _reply_before(said, common)
    keep = stored[: view[cut - 1] + 1] if cut else [m for m in stored if m.role == "system"]
    if common == len(view):
        conversation = _conversation(stored, view[:common], sent)
        return _Fit(member, known, common, common, conversation, tuple(keep), cut)
    return _Fit(member, known, None, common, None, tuple(keep), cut)


def _fit_compressed(
    known: StoredHistory,
    member: SessionName,
    view: list[int],
    said: Sequence[Message],
    sent: list[Message],
) -> _Fit:
    """A compressed history is matched by its newest mark (core/wire_marks.py): the
    client's conversation up to it hashes the same, and what was stored after it equals
    what follows. Diverged, a fork holds the client's own version of the common part."""
    stored = known.messages
    marked = [(i, mark) for i, m in enumerate(stored) if (mark := wire_marks.read(m))]
    cut = _reply_before(said, len(said))
    keep = (*(m for m in stored if m.role == "system"), *map(_stamped, sent[:cut]))
    if marked:
        last, mark = marked[-1]
        after = [stored[i] for i in view if i > last]
        end = mark.count + len(after)
        if (
            end <= len(sent)
            and all(wire_marks.same(a, b) for a, b in zip(after, sent[mark.count :], strict=False))
            and chain(sent[: mark.count], version=mark.version) == mark.digest
        ):
            if mark.version == wire_marks.VERSION:
                conversation = Mark(len(sent), chain(sent[mark.count :], mark.digest))
            else:
                conversation = Mark(len(sent), chain(sent))
            return _Fit(member, known, end, end, conversation, keep, cut)
    return _Fit(member, known, None, 0, None, keep, cut)


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
        if mark is not None and mark.count == position + 1 and mark.version == wire_marks.VERSION:
            return Mark(len(sent), chain(sent[mark.count :], mark.digest))
    return Mark(len(sent), chain(sent))


def _fork(
    ctx: AppContext, family: SessionName, messages: Sequence[Message], granted: Granted
) -> SessionName:
    """A new member of the family: the first free `NAME~k`."""
    for number in range(2, 100_000):
        name = SessionName.parse(f"{family.value}~{number}")
        if ctx.history.exists(name) or ctx.transcript.exists(name):
            continue
        if not granted(name.value):
            raise UsageError(
                f"the conversation needs a new fork of {family.value!r}, and this token may "
                f"not use {name.value!r}",
                hint="grant the token the family's name as a prefix",
            )
        try:
            ctx.history.write(name, messages, expected_revision=0)
        except ConflictError:
            continue  # another request took this name a moment ago
        return name
    raise UsageError(f"session {family.value!r} has too many forks")


def _split_tail(said: Sequence[Message]) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
    """A stateless request: the history, and the messages after the last reply."""
    cut = len(said)
    while cut > 0 and said[cut - 1].role != "assistant":
        cut -= 1
    return tuple(said[:cut]), tuple(said[cut:])


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
