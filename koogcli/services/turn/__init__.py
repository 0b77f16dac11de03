"""A turn (SPEC §1): what it is asked (request.py), its state and what it records
(state.py), the budget and compression before it (prepare.py), its steps (steps.py), the
whole, resume and abandonment (run.py), and where a serve client's resent conversation
belongs in its session family (placement.py, imported by its own path).

The names below are the turn's public face: `from koogcli.services import turn`,
`turn.run_turn(ctx, turn.TurnRequest(...))`.
"""

from __future__ import annotations

from koogcli.services.turn.request import (
    ClientOptions,
    RequestInfo,
    TurnAbandonedError,
    TurnEvents,
    TurnRequest,
    TurnResult,
)
from koogcli.services.turn.run import (
    abandon,
    close_stored,
    interrupted,
    resume_turn,
    run_turn,
    unfinished,
)

__all__ = [
    "ClientOptions",
    "RequestInfo",
    "TurnAbandonedError",
    "TurnEvents",
    "TurnRequest",
    "TurnResult",
    "abandon",
    "close_stored",
    "interrupted",
    "resume_turn",
    "run_turn",
    "unfinished",
]
