"""A `history search` hit: a module of its own so a search defines one result type, not
every command's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from koogcli.core.messages import Message


@dataclass(frozen=True, slots=True)
class Found:
    """One message `history search` found: where, when, and its line that matched."""

    session: str
    turn: int
    message: Message
    line: str
    terms: tuple[str, ...]
