"""How checkpoints, rollbacks, compressions and memory records look on screen and in JSON.

Shared by the CLI commands and the REPL's slash commands; writing is render.py's job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from koogcli.core.messages import CUT_LABELS, FINISH_KEY, local_time
from koogcli.core.usage import Usage
from koogcli.core.why import sent_records
from koogcli.ui.archive_views import source_dict
from koogcli.ui.render import cache_words, one_line, table, visible

if TYPE_CHECKING:  # names for the hints only: every command imports this module
    from koogcli.core.agent_edits import FileFate
    from koogcli.core.checkpoints import Checkpoint
    from koogcli.core.memory import MemoryRecord, SearchHit
    from koogcli.core.messages import Message
    from koogcli.core.ports import SessionInfo
    from koogcli.core.results import Compensation, CompressResult, RollbackResult
    from koogcli.core.why import Explained, StepTrace


def session_dict(s: SessionInfo) -> dict[str, object]:
    """A session as `history list --json` and `koog serve` show it."""
    return {
        "session": s.name,
        "message_count": s.messages,
        "updated_at": s.updated_at,
        "preview": s.preview,
        "error": s.problem,
        "forked_from": (
            None if s.forked_from is None else {"session": s.forked_from[0], "at": s.forked_from[1]}
        ),
        "source": s.source.tool if s.source else "koog",
        "origin": None if s.source is None else source_dict(s.source),
    }


def checkpoint_rows(
    checkpoints: Sequence[Checkpoint], files: Mapping[str, Sequence[str]] | None = None
) -> str:
    """`files`: an agent session's files rolling back to each point would change (a FILES
    column, only when any would)."""
    rows = []
    for c in checkpoints:
        if not c.readable:
            what = "unreadable" if c.format_version < 0 else f"format v{c.format_version}"
            rows.append((c.id, local_time(c.created_at), what, "", c.label or ""))
            continue
        kind = checkpoint_kind(c)
        count = str(c.message_count) if c.kind != "tombstone" else ""
        rows.append((c.id, local_time(c.created_at), kind, count, c.label or ""))
    if not files or not any(files.values()):
        return table(rows, ("ID", "CREATED", "KIND", "MESSAGES", "LABEL"))
    named = [_file_names(files.get(row[0], ())) for row in rows]
    wide = [(*row, shown) for row, shown in zip(rows, named, strict=True)]
    return table(wide, ("ID", "CREATED", "KIND", "MESSAGES", "LABEL", "FILES"))


def _file_names(paths: Sequence[str]) -> str:
    names = [p.rsplit("/", 1)[-1] for p in paths]
    return ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")


def checkpoint_kind(c: Checkpoint) -> str:
    if c.kind == "step":
        return f"step {c.step}"
    if c.kind == "tombstone":
        return f"turn {c.reason}"
    if c.kind == "restore":
        return "manual" if c.manual else f"before {c.reason}"
    return str(c.kind)


def checkpoint_dict(
    c: Checkpoint, with_messages: bool = False, files: Sequence[str] | None = None
) -> dict[str, object]:
    data: dict[str, object] = {
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
    if files is not None:
        data["files"] = list(files)  # an agent's files rolling back to it would change
    if with_messages:
        data["output"] = c.output
        data["details"] = c.details
        data["messages"] = [m.to_dict() for m in c.messages]
    return data


def rollback_lines(result: RollbackResult, repl: bool = False) -> list[str]:
    """What a rollback did, one line per tool call it took out of the history (§5.6).
    `repl`: hints name the REPL's slash commands instead of shell commands."""
    if result.restored is None:
        again = "/rollback" if repl else f"`koog rollback -s {result.session} --latest`"
        lines = [
            f"finished the rollback of {result.session} that was stopped (it had restored "
            "the history); nothing more was rolled back"
        ]
        lines += [f"  {one_line(fate.describe(), 300)}" for fate in result.files_finished]
        return [*lines, f"undo that rollback with {again}"]
    lines = [
        f"restored {result.session} to checkpoint {result.restored.id} "
        f"({result.messages_before} → {result.messages_after} messages), "
        f"undoing {result.undoes}"
    ]
    if result.note is not None:
        lines.append(f"  added a note: {one_line(result.note.text, 200)}")
    lines += compensation_lines(result.compensations)
    if result.files_finished:
        lines.append("  finished the file restores an interrupted rollback left:")
        lines += [f"    {one_line(fate.describe(), 300)}" for fate in result.files_finished]
    lines += [f"  {one_line(fate.describe(), 300)}" for fate in result.files]
    if result.undo_point:
        undone = any(c.status == "undone" for c in result.compensations)
        if repl:
            force, again = "/rollback --force", "/rollback"
        else:
            base = f"koog rollback -s {result.session} --latest"
            force, again = f"`{base} --force`", f"`{base}`"
        lines.append(
            f"{force} brings the history back with a note; the tools' effects stay undone"
            if undone
            else f"undo this rollback with {again}"
        )
    return lines


def compensation_lines(compensations: Sequence[Compensation]) -> list[str]:
    """`undone: create_user(Alex)`, `left in place: ... (why)`: every removed call."""
    return [f"  {one_line(comp.describe(), 300)}" for comp in compensations]


def rollback_dict(result: RollbackResult) -> dict[str, object]:
    """`rollback --json`."""
    return {
        "session": result.session,
        "restored": result.restored.id if result.restored is not None else None,
        "retried": result.retried,
        "undoes": result.undoes,
        "note": result.note.text if result.note else None,
        "undo": result.undo_point,
        "before": {"message_count": result.messages_before},
        "after": {"message_count": result.messages_after},
        "compensations": [compensation_dict(c) for c in result.compensations],
        "finished": [compensation_dict(c) for c in result.finished],
        "files": [file_dict(f) for f in result.files],
        "files_finished": [file_dict(f) for f in result.files_finished],
    }


def file_dict(fate: FileFate) -> dict[str, object]:
    """One file a rollback set back, left or could not cover."""
    return {
        "path": fate.path,
        "status": fate.status,
        "detail": fate.detail or None,
        "calls": list(fate.move.calls) if fate.move is not None else [],
    }


def compensation_dict(comp: Compensation) -> dict[str, object]:
    return {
        "id": comp.call.id,
        "tool": comp.call.name,
        "arguments": comp.call.arguments,
        "status": comp.status,
        "reason": comp.reason or None,
        "result": comp.outcome.text if comp.outcome else None,
        "error": comp.outcome.error if comp.outcome else None,
    }


def finished_lines(session: str, compensations: Sequence[Compensation]) -> list[str]:
    """Compensations an interrupted rollback of the session left, run now."""
    if not compensations:
        return []
    head = f"finished the compensations an interrupted rollback of {session} left:"
    return [head, *compensation_lines(compensations)]


def compress_dict(result: CompressResult) -> dict[str, object]:
    from koogcli.core.tokens import request_tokens as estimate_tokens

    data: dict[str, object] = {
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


def compress_line(result: CompressResult, repl: bool = False) -> str:
    from koogcli.core.tokens import request_tokens as estimate_tokens

    if not result.changed:
        return f"{result.strategy}: nothing to keep was found; the history of {result.session} is unchanged"
    verb = "would compress" if result.dry_run else "compressed"
    line = (
        f"{verb} {result.session}: {len(result.before)} → {len(result.after)} messages, "
        f"~{estimate_tokens(result.before)} → ~{estimate_tokens(result.after)} tokens, "
        f"{result.requests} request(s)"
    )
    if result.checkpoint:
        line += (
            "; undo with /rollback"
            if repl
            else f"; undo with `koog rollback -s {result.session} --latest --yes`"
        )
    return line


def record_dict(record: MemoryRecord, hit: SearchHit | None = None) -> dict[str, object]:
    data: dict[str, object] = {
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


def hits_table(hits: Sequence[SearchHit]) -> str:
    rows = [
        (f"{h.score:.3f}", h.record.id[:12], h.record.namespace, one_line(h.record.content, 80))
        for h in hits
    ]
    return table(rows, ("SCORE", "ID", "NAMESPACE", "CONTENT"))


def records_table(records: Sequence[MemoryRecord]) -> str:
    rows = [
        (r.id[:12], r.namespace, local_time(r.created_at), one_line(r.content, 70)) for r in records
    ]
    return table(rows, ("ID", "NAMESPACE", "CREATED", "CONTENT"))


def empty_history(session: str) -> str:
    """Said the same way by `koog history show` and the REPL's /history."""
    return f"session {session} has no stored messages"


def recent_exchanges(messages: Sequence[Message], pairs: int, lines_each: int = 4) -> str:
    """The last `pairs` user messages and what answered them, each cut to a few lines."""
    talk = [
        m
        for m in messages
        if m.role in ("user", "assistant") and m.text.strip() and not m.meta.get("kind")
    ]
    starts = [i for i, m in enumerate(talk) if m.role == "user"]
    if not starts or pairs <= 0:
        return ""
    shown = talk[starts[-pairs] if len(starts) >= pairs else 0 :]
    blocks = []
    for m in shown:
        lines = visible(m.text.strip()).splitlines()
        cut = [line if len(line) <= 200 else line[:199] + "…" for line in lines[:lines_each]]
        if len(lines) > lines_each:
            cut.append(f"… ({len(lines) - lines_each} more lines)")
        body = "\n    ".join(cut)
        blocks.append(f"[{m.role}] {body}")
    return "\n".join(blocks)


def usage_dict(usage: Usage | None) -> dict[str, int | None] | None:
    """`usage` in JSON (`chat --json`, `why --json`): one shape whatever the server said,
    `cached_tokens` null when it did not report the prompt tokens its cache served."""
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.cached_tokens,
    }


def why_dict(found: Explained) -> dict[str, object]:
    """`koog why --json`."""
    reply = {"id": found.reply.id, "created_at": found.reply.created_at}
    shaped = found.why.to_dict()
    if found.why.memory is not None:  # every record sent, with its text and its question
        sent = [
            {
                **r,
                "text": found.record_texts.get(str(r["id"])),
                "question_text": found.question_texts.get(str(r.get("question"))),
            }
            for r in sent_records(found.why)
        ]
        shaped["memory"] = {**found.why.memory, "sent": sent}
    return {
        "session": found.session,
        "turn": found.turn,
        "turns": found.turns,
        "reply": reply,
        "rolled_back": found.rolled_back,
        "cancelled_turns": list(found.cancelled),
        "file_edits": list(found.edits),
        **shaped,
        # What the server reported for the reply's request, cached prompt tokens included.
        "usage": usage_dict(Usage.from_dict(found.reply.meta.get("usage"))),
        "schema": found.reply.meta.get("schema"),  # `koog chat --schema`: what it had to fit
        "options": found.reply.meta.get("options"),  # `koog chat -o KEY VALUE`
    }


def why_lines(found: Explained) -> list[str]:
    """What shaped a reply, in words."""
    w = found.why
    temperature = "unset" if w.temperature is None else f"{w.temperature:g}"
    lines = [
        f"turn {found.turn} of {found.turns} in {found.session}, answered "
        f"{local_time(found.reply.created_at)} by {w.model} (temperature {temperature}, "
        f"{'streamed' if w.stream else 'not streamed'}, {w.tools} tools offered)",
        f"system prompt: {w.system_chars:,} characters, from {w.system_source}",
    ]
    if w.mcp_tools:
        lines.append(f"MCP tools offered ({len(w.mcp_tools)}): " + ", ".join(w.mcp_tools))
    if found.rolled_back is not None:
        lines.insert(
            1,
            f"rolled back: a rollback at {local_time(found.rolled_back)} took this reply out "
            "of the history; it is not in effect",
        )
    later = [n for n in found.cancelled if n > found.turn]
    if later:  # why the last turn is not the one explained
        lines.insert(1, _cancelled_words(later))
    if w.passed_through:
        lines.append(
            "preprocessors: not applied: the client's own request was passed through, "
            "memory records appended after its questions"
        )
    elif w.preprocessors:
        lines.append("preprocessors: " + "; ".join(_step_words(s) for s in w.preprocessors))
    else:
        lines.append("preprocessors: none configured")
    if w.summary:
        how = ", ".join(
            p for p in (w.summary.get("strategy"), local_time(w.summary["created_at"])) if p
        )
        lines.append(f"summary in effect: {w.summary['id'][:8]} ({w.summary['kind']}, {how})")
    else:
        lines.append("summary in effect: none")
    lines.append(_memory_words(w.memory))
    lines.extend(_sent_lines(found))
    context = (
        f"~{w.estimate:,} of {w.limit:,} tokens"
        if w.estimate is not None and w.limit
        else "size unknown (llm.context_tokens unset)"
    )
    if w.compressed_before:
        context += "; automatic compression ran before this turn"
    if w.recovered:
        context += "; the server refused it as too long and it was sent again, compressed"
    lines.append(f"context: {context}")
    cache = cache_words(Usage.from_dict(found.reply.meta.get("usage")))
    if cache is not None:  # only what the server reported
        lines.append(cache)
    schema = found.reply.meta.get("schema")
    if isinstance(schema, dict):  # `koog chat --schema`
        fields = schema.get("properties")
        named = ", ".join(map(str, fields)) if isinstance(fields, dict) else "see --json"
        lines.append(f"structured output: the reply had to fit a JSON schema ({named})")
    options = found.reply.meta.get("options")
    if isinstance(options, dict) and options:  # `koog chat -o KEY VALUE`
        lines.append("options: " + ", ".join(f"{k}={v!r}" for k, v in options.items()))
    cut = CUT_LABELS.get(str(found.reply.meta.get(FINISH_KEY)))
    if cut is not None:
        lines.append(f"the reply: {cut} (finish_reason {found.reply.meta[FINISH_KEY]})")
    if found.edits:
        lines.append("files the agent's edits changed: " + "; ".join(found.edits))
    return [visible(line) for line in lines]  # file and tool names came from outside


def _cancelled_words(turns: Sequence[int]) -> str:
    """`turn 3 was cancelled …`, `turns 2-3 were …`, `turns 2, 5 were …`."""
    if len(turns) == 1:
        return f"turn {turns[0]} was cancelled before its reply; there is nothing to explain"
    run = turns[-1] - turns[0] == len(turns) - 1
    which = f"{turns[0]}-{turns[-1]}" if run else ", ".join(map(str, turns))
    return f"turns {which} were cancelled before their replies; there is nothing to explain"


def _step_words(step: StepTrace) -> str:
    if step.changed and step.before == step.after:
        return f"{step.kind} rewrote {step.changed} of {step.before} messages"
    removed = step.before - step.after
    if not removed:
        return f"{step.kind} removed nothing ({step.before} messages)"
    first = ", ".join(i[:8] for i in step.removed)
    return f"{step.kind} removed {removed} of {step.before} messages (first: {first})"


def _memory_words(memory: Mapping[str, Any] | None) -> str:
    if memory is None:
        return "long-term memory: retrieval off"
    records = memory.get("records") or []
    earlier = memory.get("earlier")
    also = (
        f"; {_count(earlier, 'record')} placed with earlier questions sent again"
        if isinstance(earlier, int) and earlier > 0
        else ""
    )
    if not records:
        return f"long-term memory: nothing matched in {memory.get('namespace')}{also}"
    hits = ", ".join(f"{r['id'][:8]} (score {float(r['score']):.3f})" for r in records)
    return (
        f"long-term memory: {_count(len(records), 'record')} from {memory.get('namespace')} by "
        f"{memory.get('mode')}: {hits}{also}"
    )


def _sent_lines(found: Explained) -> list[str]:
    """Each record the request carried: its score, id and text, and the question it
    followed (a record forgotten since says so)."""
    lines = []
    for r in sent_records(found.why):
        text = found.record_texts.get(str(r["id"]))
        said = _clipped(text) if text is not None else "(forgotten or deleted since)"
        question = found.question_texts.get(str(r.get("question")))
        after = f"  after {_clipped(question, 50)}" if question is not None else ""
        lines.append(f"  {float(r['score']):.3f}  {str(r['id'])[:8]}  {said}{after}")
    return lines


def _clipped(text: str, width: int = 70) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= width else one[: width - 1] + "…")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def cut_reply(finish_reason: str | None, max_tokens: int | None) -> str | None:
    """What a reply the model did not finish says on stderr (REPL and one-shot alike)."""
    if finish_reason == "length":
        if max_tokens:
            return (
                f"cut at max_tokens ({max_tokens:,}): the reply is not whole; raise [llm] "
                "max_tokens or pass --max-tokens N"
            )
        return "cut at the server's length limit: the reply is not whole"
    if finish_reason == "content_filter":
        return "cut by a content filter: the reply is not whole"
    return None
