"""Tool-call identity is koog's (SPEC §5.15): every call has an id unique within its session.

Real servers reuse ids: numbered per turn (`list_dir:0` again next turn), one constant id,
the function's name, two calls with one id in one message, or none at all
(ENDPOINT_QUIRKS.md). The compensation journal, the compensation plan, the contradiction
check and resume all key on a call's id, so an id is taken as the server sent it only when
the session has never used it; otherwise the call gets a new one: 9 letters and digits,
the one format every known server accepts (Mistral wants exactly that).

Results follow their calls: when a call is renamed, the `tool` message answering it gets
the new id, pairing results to calls in order where one id stood for several calls.
"""

from __future__ import annotations

import string
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from koogcli.core.messages import Message, ToolCall

ALPHABET = string.ascii_letters + string.digits
MINTED_LENGTH = 9


def mint(taken: Callable[[str], bool]) -> str:
    """A new id the session has not used."""
    import secrets  # only when an id is minted (its import is a few milliseconds)

    while True:
        candidate = "".join(secrets.choice(ALPHABET) for _ in range(MINTED_LENGTH))
        if not taken(candidate):
            return candidate


def identify(calls: Iterable[ToolCall], taken: Callable[[str], bool]) -> tuple[ToolCall, ...]:
    """The calls of one assistant message with session-unique ids. `taken(id)` says whether
    the session already used an id; ids given here count as used from then on."""
    given: set[str] = set()

    def used(candidate: str) -> bool:
        return candidate in given or taken(candidate)

    out = []
    for call in calls:
        call_id = call.id if call.id and not used(call.id) else mint(used)
        given.add(call_id)
        out.append(call if call_id == call.id else replace(call, id=call_id))
    return tuple(out)


def ids_in(messages: Iterable[Message]) -> set[str]:
    """Every tool-call id the messages hold, on calls and on results."""
    found: set[str] = set()
    for m in messages:
        found.update(c.id for c in m.tool_calls if c.id)
        if m.tool_call_id:
            found.add(m.tool_call_id)
    return found


def normalise(
    messages: Sequence[Message], taken: Callable[[str], bool] = lambda _id: False
) -> list[Message]:
    """The messages with every call's id unique (among them and against `taken`) and each
    result renamed with its call. Results are paired to calls in order: the first result
    naming an id answers the first unanswered call that had it; a result with no id
    answers the first unanswered call. Unchanged messages are returned as they are."""
    seen: set[str] = set()

    def used(candidate: str) -> bool:
        return candidate in seen or taken(candidate)

    waiting: dict[str | None, deque[str]] = {}  # original id -> new ids of unanswered calls
    unanswered: list[str] = []  # new ids in call order, for results that name none
    out: list[Message] = []
    for m in messages:
        if m.tool_calls:
            calls = identify(m.tool_calls, used)
            for before, after in zip(m.tool_calls, calls, strict=True):
                seen.add(str(after.id))
                waiting.setdefault(before.id or None, deque()).append(str(after.id))
                unanswered.append(str(after.id))
            if calls != m.tool_calls:
                m = replace(m, tool_calls=calls)
        elif m.role == "tool":
            queue = waiting.get(m.tool_call_id or None)
            new_id = queue.popleft() if queue else None
            if new_id is None and not m.tool_call_id and unanswered:
                new_id = unanswered[0]
                for queued in waiting.values():
                    if new_id in queued:
                        queued.remove(new_id)
            if new_id is not None:
                unanswered.remove(new_id)
                if new_id != m.tool_call_id:
                    m = replace(m, tool_call_id=new_id)
        out.append(m)
    return out


def distinct(messages: Sequence[Message]) -> list[Message]:
    """A request's messages with no id given to two calls: histories stored before ids were
    koog's may repeat one, and strict servers refuse that. One cheap pass when none does."""
    return normalise(messages) if has_duplicates(messages) else list(messages)


def has_duplicates(messages: Sequence[Message]) -> bool:
    """Whether any call lacks an id or shares one with another call."""
    seen: set[str | None] = set()
    for m in messages:
        for call in m.tool_calls:
            if not call.id or call.id in seen:
                return True
            seen.add(call.id)
    return False
