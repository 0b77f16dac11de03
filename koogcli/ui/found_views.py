"""How `history search` hits look on screen and in JSON (and the REPL's `/search`); kept
apart from views.py so a search imports no more than it shows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from koogcli.core.messages import local_time
from koogcli.ui.render import visible

if TYPE_CHECKING:
    import re

    from koogcli.core.found import Found


def found_dict(f: Found) -> dict[str, object]:
    """A hit of `history search --json`."""
    return {
        "session": f.session,
        "turn": f.turn or None,  # a failed turn's words have no turn number
        "role": f.message.role,
        "id": f.message.id,
        "created_at": f.message.created_at,
        "line": f.line,
        "content": f.message.content,
    }


def found_lines(found: Sequence[Found], mark: Callable[[str], str]) -> list[str]:
    """`work  turn 3  2026-11-30 14:02  user  ... the matching line ...`, the words marked."""
    rows = []
    for f in found:
        line = visible(f.line)
        line = line if len(line) <= 160 else line[:159] + "…"
        rows.append(
            f"{f.session}  {f'turn {f.turn}' if f.turn else 'failed turn'}  "
            f"{local_time(f.message.created_at)}  "
            f"{f.message.role}  {_marked(line, f.terms, mark)}"
        )
    return rows


def _marked(line: str, terms: Sequence[str], mark: Callable[[str], str]) -> str:
    pattern = words_pattern(terms)
    return line if pattern is None else pattern.sub(lambda m: mark(m.group(0)), line)


def words_pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    """The searched words, case aside, the longest first (None: no words): what a hit
    marks, in a terminal and on the page."""
    import re

    words = sorted({t for t in terms if t}, key=len, reverse=True)
    if not words:
        return None
    return re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
