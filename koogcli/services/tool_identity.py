"""Which tool-call ids a session has used (SPEC §5.15), for giving new calls unique ones.

An id counts as used when the session's history, a checkpoint, the compensation journal or
the transcript holds it: a history rolled back, windowed, compressed or replaced still
names its calls in those, and the journal and the contradiction check key on ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.tool_ids import ids_in
from koogcli.services.context import AppContext


def taken(
    ctx: AppContext, session: SessionName, messages: Sequence[Message], stored: bool = True
) -> Callable[[str], bool]:
    """A predicate over ids: held by `messages`, or (`stored`) by anything the session
    keeps. The stores are asked once per id, only for ids `messages` do not hold."""
    known = ids_in(messages)
    asked: dict[str, bool] = {}

    def used(candidate: str) -> bool:
        if candidate in known:
            return True
        if not stored:
            return False
        if candidate not in asked:
            found = ctx.transcript.used_ids(session, [candidate])
            if not found and ctx.settings.persistence.enabled:
                found = ctx.checkpoints.used_ids(session, [candidate])
            asked[candidate] = bool(found)
        return asked[candidate]

    return used
