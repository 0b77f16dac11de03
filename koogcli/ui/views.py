"""How checkpoints, rollbacks, compressions and memory records look on screen and in JSON.

Shared by the CLI commands and the REPL's slash commands; writing is render.py's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from koogcli.core.messages import local_time
from koogcli.ui.render import one_line, table


def checkpoint_rows(checkpoints: Sequence[Any]) -> str:
    rows = []
    for c in checkpoints:
        if not c.readable:
            what = "unreadable" if c.format_version < 0 else f"format v{c.format_version}"
            rows.append((c.id, local_time(c.created_at), what, "", c.label or ""))
            continue
        kind = c.kind if c.kind != "restore" else ("manual" if c.manual else f"before {c.reason}")
        if c.kind == "step":
            kind = f"step {c.step}"
        elif c.kind == "tombstone":
            kind = f"turn {c.reason}"
        count = str(c.message_count) if c.kind != "tombstone" else ""
        rows.append((c.id, local_time(c.created_at), kind, count, c.label or ""))
    return table(rows, ("ID", "CREATED", "KIND", "MESSAGES", "LABEL"))


def checkpoint_dict(c: Any, with_messages: bool = False) -> dict[str, Any]:
    data = {
        "id": c.id,
        "session": c.session,
        "seq": c.seq,
        "kind": c.kind,
        "reason": c.reason,
        "label": c.label,
        "manual": c.manual,
        "created_at": c.created_at,
        "format_version": c.format_version,
        "readable": c.readable,
        "turn_id": c.turn_id,
        "step": c.step,
        "message_count": c.message_count,
    }
    if with_messages:
        data["output"] = c.output
        data["details"] = c.details
        data["messages"] = [m.to_dict() for m in c.messages]
    return data


def rollback_lines(result: Any) -> list[str]:
    lines = [
        f"restored {result.session} to checkpoint {result.restored.id} "
        f"({result.messages_before} → {result.messages_after} messages), "
        f"undoing {result.undoes}"
    ]
    if result.note is not None:
        lines.append(f"  added a note: {one_line(result.note.text, 200)}")
    lines += compensation_lines(result.compensations)
    if result.undo_point:
        undone = any(c.outcome is not None and not c.outcome.error for c in result.compensations)
        lines.append(
            f"`koog rollback -s {result.session} --latest --force` brings the history back "
            "with a note; the tools' effects stay undone"
            if undone
            else f"undo this rollback with `koog rollback -s {result.session} --latest`"
        )
    return lines


def compensation_lines(compensations: Sequence[Any]) -> list[str]:
    lines = []
    for comp in compensations:
        call = comp.call
        if comp.outcome is None:
            lines.append(f"  no compensating tool for {call.name}({one_line(call.arguments, 80)})")
        else:
            mark = "✗" if comp.outcome.error else "✓"
            lines.append(
                f"  {mark} undo {call.name}({one_line(call.arguments, 80)}): "
                f"{one_line(comp.outcome.text, 100)}"
            )
    return lines


def finished_lines(session: str, compensations: Sequence[Any]) -> list[str]:
    """Compensations an interrupted rollback of the session left, run now."""
    if not compensations:
        return []
    head = f"finished the compensations an interrupted rollback of {session} left:"
    return [head, *compensation_lines(compensations)]


def compress_dict(result: Any) -> dict[str, Any]:
    from koogcli.core.compression import estimate_tokens

    data = {
        "session": result.session,
        "strategy": result.strategy,
        "dry_run": result.dry_run,
        "changed": result.changed,
        "before": {
            "message_count": len(result.before),
            "tokens": estimate_tokens(result.before),
        },
        "after": {"message_count": len(result.after), "tokens": estimate_tokens(result.after)},
        "requests": result.requests,
        "checkpoint": result.checkpoint,
    }
    if result.dry_run:
        data["messages"] = [m.to_dict() for m in result.after]
    return data


def compress_line(result: Any) -> str:
    data = compress_dict(result)
    if not result.changed:
        return f"{result.strategy}: nothing to keep was found; the history of {result.session} is unchanged"
    verb = "would compress" if result.dry_run else "compressed"
    line = (
        f"{verb} {result.session}: {data['before']['message_count']} → "
        f"{data['after']['message_count']} messages, ~{data['before']['tokens']} → "
        f"~{data['after']['tokens']} tokens, {result.requests} request(s)"
    )
    if result.checkpoint:
        line += f"; undo with `koog rollback -s {result.session} --latest`"
    return line


def record_dict(record: Any, hit: Any = None) -> dict[str, Any]:
    data = {
        "id": record.id,
        "namespace": record.namespace,
        "content": record.content,
        "metadata": record.metadata,
        "created_at": record.created_at,
    }
    if hit is not None:
        data["score"] = round(hit.score, 6)
        data["metric"] = hit.metric
    return data


def hits_table(hits: Sequence[Any]) -> str:
    rows = [
        (f"{h.score:.3f}", h.record.id[:12], h.record.namespace, one_line(h.record.content, 80))
        for h in hits
    ]
    return table(rows, ("SCORE", "ID", "NAMESPACE", "CONTENT"))


def records_table(records: Sequence[Any]) -> str:
    rows = [
        (r.id[:12], r.namespace, local_time(r.created_at), one_line(r.content, 70)) for r in records
    ]
    return table(rows, ("ID", "NAMESPACE", "CREATED", "CONTENT"))
