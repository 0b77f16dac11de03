"""The compensation journal: `checkpoints/<session>/compensations.jsonl` (SPEC §5.11).

Append-only, one entry per line; the last line for a (call id, rollback point) pair is that
compensation's status. Appending is one write(2) with O_APPEND, visible to every process
the moment it returns, so the "running" mark can be written immediately before the
compensating function is called: a rollback killed at any instant loses no compensation and
runs none twice, short of a kill in the few microseconds between the two. A line torn by a
crash is closed off by the next append and skipped on read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.core.checkpoints import STATUSES, CompensationEntry
from koogcli.core.messages import ToolCall

FORMAT = "koog.compensation"


def read(path: Path) -> list[CompensationEntry]:
    """Each compensation's latest entry, in the order they were first journalled."""
    try:
        data = atomic.read_bytes(path)
    except FileNotFoundError:
        return []
    latest: dict[tuple[str | None, str | None], CompensationEntry] = {}
    for line in data.splitlines():
        try:
            entry = parse_entry(json.loads(line))
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # torn by a crash mid-append
        latest[(entry.call.id, entry.rollback_point)] = entry
    return list(latest.values())


def append(path: Path, entries: Sequence[CompensationEntry], durable: bool = True) -> None:
    """Without `durable` the lines are visible to other processes at once but not synced
    to disk: for the "running" mark, where speed before the call is what counts."""
    lines = "".join(dump_entry(e) + "\n" for e in entries)
    atomic.append_text(path, lines, sync=durable)


def dump_entry(entry: CompensationEntry) -> str:
    """One journal entry as JSON (a line here, a row's body on PostgreSQL)."""
    return json.dumps({"format": FORMAT, **entry.to_dict()}, ensure_ascii=False)


def parse_entry(item: object) -> CompensationEntry:
    if not isinstance(item, dict) or item.get("format") != FORMAT:
        raise ValueError("not a journal entry")
    call, status = item["call"], item["status"]
    if status not in STATUSES or not isinstance(call, dict):
        raise ValueError(f"bad entry status {status!r}")
    function = call["function"]
    name, arguments = function["name"], function["arguments"]
    point = item.get("rollback_point")
    if not isinstance(name, str) or not isinstance(arguments, str):
        raise TypeError("a call's name and arguments must be strings")
    call_id = call.get("id")
    return CompensationEntry(
        ToolCall(call_id if isinstance(call_id, str) else None, name, arguments),
        status,
        point if isinstance(point, str) else None,
        str(item.get("at", "")),
    )
