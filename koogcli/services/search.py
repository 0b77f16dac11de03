"""`koog history search` (and the REPL's `/search`): full text over every session's
transcript. Its own module, importing only what a search needs: it is a command people
run in pipelines, and its whole run is mostly start-up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from koogcli.core.errors import UsageError
from koogcli.core.found import Found
from koogcli.core.ports import FAILED_TURN

if TYPE_CHECKING:
    from koogcli.core.names import SessionName
    from koogcli.services.context import AppContext


def check_source(source: str) -> str:
    from koogcli.core.archive import TOOLS

    if source != "koog" and source not in TOOLS:
        raise UsageError(f"unknown source {source!r}", hint=f"one of: koog, {', '.join(TOOLS)}")
    return source


def search(
    ctx: AppContext,
    words: str,
    session: SessionName | None,
    limit: int,
    source: str | None = None,
) -> list[Found]:
    """Full-text search over every session's transcript (or one's, or one source's), newest
    first."""
    if not words.split():
        raise UsageError("give the words to search for")
    if session is not None:
        ctx.require_session(session)
    terms = tuple(words.split())
    hits = ctx.transcript.search(
        words, session, limit, None if source is None else check_source(source)
    )
    by_session: dict[str, list[int]] = {}
    for hit in hits:
        by_session.setdefault(hit.session, []).append(hit.position)
    turns: dict[tuple[str, int], int] = {}
    for name, positions in by_session.items():
        numbers = ctx.transcript.turn_numbers(name, positions)
        turns.update({(name, p): n for p, n in zip(positions, numbers, strict=True)})
    return [
        Found(
            hit.session,
            0 if hit.turn_id.startswith(FAILED_TURN) else turns[(hit.session, hit.position)],
            hit.message,
            matching_line(hit.message.text, terms),
            terms,
        )
        for hit in hits
    ]


def matching_line(text: str, terms: Sequence[str]) -> str:
    """The first line holding one of the words (case aside), else the first line."""
    lowered = [t.casefold() for t in terms]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        folded = line.casefold()
        if any(t in folded for t in lowered):
            return line
    return lines[0] if lines else ""
