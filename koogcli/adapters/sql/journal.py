"""The compensation journal's entries as stored (SPEC §5.11): one row per (call id,
rollback point), its body the entry as JSON; the latest body of a pair is its status."""

from __future__ import annotations

import json

from koogcli.core.checkpoints import STATUSES, CompensationEntry
from koogcli.core.messages import ToolCall

FORMAT = "koog.compensation"


def dump_entry(entry: CompensationEntry) -> str:
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
