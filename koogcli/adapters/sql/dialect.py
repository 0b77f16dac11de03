"""Where SQLite and PostgreSQL differ, for the stores written once for both (adapters/sql/).

The stores write their SQL once, with `%s` / `%(name)s` parameters (the SQLite database
turns them into its own) and ask a dialect for the few pieces that differ: lists passed as
parameters, a row's list of message ids (`items`), locks, and a substring test.
- PostgreSQL: arrays, advisory locks held to the end of the transaction (two machines
  never take one checkpoint number).
- SQLite: JSON text for lists, no locks (a write transaction holds the whole database:
  `BEGIN IMMEDIATE`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dialect:
    name: str

    @property
    def postgres(self) -> bool:
        return self.name == "postgresql"

    def listed(self, values: Sequence[object]) -> object:
        """A list as one parameter (read back by `each`)."""
        return list(values) if self.postgres else json.dumps(list(values), ensure_ascii=False)

    def each(self, kind: str = "text") -> str:
        """A table of the values of one list parameter, as column `value`."""
        if self.postgres:
            return f"(SELECT unnest(%s::{'bigint' if kind == 'int' else 'text'}[]) AS value)"
        return "(SELECT value FROM json_each(%s))"

    def items(self, ids: Sequence[int]) -> object:
        """A row's message ids, as stored: an array (PostgreSQL), or runs of consecutive
        ids as JSON (SQLite: a checkpoint of 50,000 messages stored in order is `[[1,
        50000]]`, not 350 KB written at every step of every turn)."""
        return list(ids) if self.postgres else json.dumps(encode_runs(ids))

    def read_items(self, stored: Any) -> list[int]:
        if self.postgres:
            return [int(i) for i in stored]
        return decode_runs(json.loads(stored))

    def item_count(self) -> str:
        """The number of messages of a checkpoint row, as an SQL expression."""
        return "cardinality(items)" if self.postgres else "message_count"

    def lock(self, cur: Any, key: str, exclusive: bool = True) -> None:
        """Held to the end of the transaction (SQLite's write transaction holds it all)."""
        if self.postgres:
            function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
            cur.execute(f"SELECT {function}(hashtextextended(%s, 0))", [key])

    def contains(self, haystack: str, needle: str) -> str:
        return (
            f"strpos({haystack}, {needle}) > 0"
            if self.postgres
            else f"instr({haystack}, {needle}) > 0"
        )

    def earlier(self, column: str) -> str:
        """`column` (an ISO-8601 time) before the parameter."""
        if self.postgres:
            return f"{column}::timestamptz < %(before)s::timestamptz"
        return f"julianday({column}) < julianday(%(before)s)"


def encode_runs(ids: Sequence[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


_ROW_MAX = 2**63 - 1  # the largest row id SQLite and PostgreSQL's bigint hold


def decode_runs(runs: Any) -> list[int]:
    """Ids from runs `[first, last]`; anything else is damage (ValueError)."""
    return [i for first, last in checked_runs(runs) for i in range(first, last + 1)]


def checked_runs(runs: Any) -> list[tuple[int, int]]:
    """Runs as stored, each `[first, last]` checked (ValueError), not expanded."""
    if not isinstance(runs, list):
        raise ValueError("message ids are not a list of runs")
    out = []
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and all(type(i) is int for i in run)):
            raise ValueError(f"not a run of message ids: {run!r}")
        if run[1] < run[0] or run[1] - run[0] > 10_000_000 or run[0] < 1 or run[1] > _ROW_MAX:
            raise ValueError(f"not a run of message ids: {str(run)[:80]}")
        out.append((run[0], run[1]))
    return out


POSTGRES = Dialect("postgresql")
SQLITE = Dialect("sqlite")
