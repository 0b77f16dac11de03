"""Responses API responses kept by `koog serve` (SPEC §6): a response is the stored reply
of a session turn, marked with its key; its id names the session's family and the key,
so `GET /v1/responses/{id}` and `previous_response_id` find it wherever placement put it
(the session or one of its forks) the moment the turn is stored. Deleting a response
forgets its key; the conversation stays in the session (`koog rollback` undoes turns)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from koogcli.core import wire_marks
from koogcli.core.errors import ConflictError, KoogError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.services.context import AppContext
from koogcli.services.turn.placement import family_of, members

KEY = "response"


class ResponseNotFoundError(KoogError):
    """No stored response has that id (or the client may not see it)."""


@dataclass(frozen=True, slots=True)
class StoredResponse:
    session: SessionName
    reply: Message
    before: list[Message]  # the conversation up to the reply (system messages aside)
    input: list[Message]  # what was sent after the reply before it: the response's input


def find(ctx: AppContext, family: str, key: str, granted: Callable[[str], bool]) -> StoredResponse:
    try:
        named = SessionName.parse(family)
    except KoogError:
        raise _missing() from None
    if not granted(named.value):
        raise _missing()
    for member in members(ctx, family_of(named, granted), named, granted):
        messages = ctx.history.read(member).messages
        for index, m in enumerate(messages):
            if m.role == "assistant" and m.meta.get(KEY) == key:
                before = [x for x in messages[:index] if wire_marks.conversational(x)]
                start = max(
                    (i + 1 for i, x in enumerate(before) if x.role == "assistant"), default=0
                )
                return StoredResponse(member, m, before, before[start:])
    raise _missing()


def forget(ctx: AppContext, found: StoredResponse) -> None:
    """The response's key removed from its reply: it is no longer found."""
    for _ in range(5):
        stored = ctx.history.read(found.session)
        messages = [
            replace(m, meta={k: v for k, v in m.meta.items() if k != KEY})
            if m.id == found.reply.id
            else m
            for m in stored.messages
        ]
        try:
            ctx.history.write(found.session, messages, expected_revision=stored.revision)
            return
        except ConflictError:
            continue
    raise ConflictError(f"session {found.session.value} kept changing; try again")


def _missing() -> ResponseNotFoundError:
    return ResponseNotFoundError("no stored response has that id")
