"""Every write to stdout/stderr goes through here.

stdout carries results only (a reply, a listing, one JSON document); diagnostics go to
stderr. Plain text and no ANSI codes unless the stream is a terminal and NO_COLOR is unset.
rich is imported only where a terminal rendering needs it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from koogcli.core.errors import EndpointNotConfiguredError, KoogError
from koogcli.core.messages import Message, ToolCall
from koogcli.core.ports import ToolOutcome


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def color_ok(stream: TextIO) -> bool:
    return is_tty(stream) and not os.environ.get("NO_COLOR")


def out(text: str, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    stream.write(text if text.endswith("\n") else text + "\n")
    stream.flush()


def json_out(data: Any) -> None:
    out(json.dumps(data, ensure_ascii=False, indent=2))


def note(text: str) -> None:
    """A diagnostic line on stderr, dimmed on a colour terminal."""
    if color_ok(sys.stderr):
        text = f"\x1b[2m{text}\x1b[0m"
    out(text, sys.stderr)


def error(err: KoogError) -> None:
    if isinstance(err, EndpointNotConfiguredError):
        out(FIRST_RUN_GUIDE, sys.stderr)
        return
    out(f"koog: error: {err.message}", sys.stderr)
    if err.hint:
        out(f"koog: hint: {err.hint}", sys.stderr)


def internal_error(exc: BaseException) -> None:
    out(f"koog: internal error: {type(exc).__name__}: {exc}", sys.stderr)
    out("koog: hint: rerun with KOOG_DEBUG=1 for a traceback, and report it", sys.stderr)


FIRST_RUN_GUIDE = """\
koog: no model endpoint configured (no API key and no base URL).
Set one of these, then run `koog chat` again:
  export OPENAI_API_KEY=sk-...                       # OpenAI
  export OPENAI_BASE_URL=http://127.0.0.1:11434/v1   # a local server (Ollama, llama.cpp, vLLM)
Or put them in the config file (`koog config init`, then edit `koog config path`):
  [llm]  base_url = "http://127.0.0.1:8080/v1"   api_key_env = "MY_KEY_VAR"   model = "..."\
"""


def format_messages(messages: Sequence[Message], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([m.to_dict() for m in messages], ensure_ascii=False, indent=2)
    if fmt == "jsonl":
        return "\n".join(json.dumps(m.to_dict(), ensure_ascii=False) for m in messages)
    blocks = [_message_block(m, markdown=fmt == "markdown") for m in messages]
    return ("\n\n" if fmt == "markdown" else "\n").join(blocks)


def _message_block(m: Message, markdown: bool) -> str:
    label = m.role if m.role != "tool" else f"tool {m.name or ''}".rstrip()
    if m.meta.get("kind"):
        label += f" ({m.meta['kind']})"
    if m.meta.get("cancelled"):
        label += " (cancelled)"
    lines = [m.text] if m.text else []
    lines += [f"→ {c.name}({c.arguments})" for c in m.tool_calls]
    body = "\n".join(lines)
    if markdown:
        return f"### {label}\n\n{body}"
    indented = body.replace("\n", "\n    ")
    return f"[{label}] {indented}"


def _one_line(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tool_call_line(call: ToolCall) -> str:
    return f"→ {call.name}({_one_line(call.arguments, 100)})"


def tool_result_line(outcome: ToolOutcome) -> str:
    return f"{'✗' if outcome.error else '←'} {_one_line(outcome.text)}"


def table(rows: Iterable[Sequence[str]], headers: Sequence[str]) -> str:
    data = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in data) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in data
    )


class ReplyWriter:
    """Shows a streamed reply: plain text as it arrives, or live Markdown on a terminal."""

    def __init__(self, stream: TextIO | None = None, markdown: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.markdown = markdown and is_tty(self.stream)
        self._parts: list[str] = []
        self._live: Any = None

    def delta(self, text: str) -> None:
        self._parts.append(text)
        if self.markdown:
            self._update()
        else:
            self.stream.write(text)
            self.stream.flush()

    def _update(self) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.markdown import Markdown

        if self._live is None:
            console = Console(file=self.stream, no_color=bool(os.environ.get("NO_COLOR")))
            self._live = Live(console=console, refresh_per_second=12, vertical_overflow="visible")
            self._live.start()
        self._live.update(Markdown("".join(self._parts)))

    def finish(self, text: str | None = None) -> None:
        """End the reply; `text` covers non-streamed replies that had no deltas."""
        if text and not self._parts:
            self.delta(text)
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif not self.markdown:
            self.stream.write("\n")
            self.stream.flush()

    def abort(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self._parts:
            self.stream.write("\n")
            self.stream.flush()


def confirm_destructive(question: str, yes: bool) -> None:
    """Ask on a terminal; elsewhere demand --yes (SPEC §2: exit 2, nothing changed)."""
    from koogcli.core.errors import UsageError

    if yes:
        return
    if not is_tty(sys.stdin):
        raise UsageError(f"refusing to {question} without confirmation", hint="pass --yes")
    import typer

    if not typer.confirm(f"{question[0].upper()}{question[1:]}?", default=False, err=True):
        raise UsageError("cancelled; nothing changed")


def checkpoint_rows(checkpoints: Sequence[Any]) -> str:
    rows = []
    for c in checkpoints:
        if not c.readable:
            what = "unreadable" if c.format_version < 0 else f"format v{c.format_version}"
            rows.append((c.id, c.created_at[:19].replace("T", " "), what, "", c.label or ""))
            continue
        kind = c.kind if c.kind != "restore" else ("manual" if c.manual else f"before {c.reason}")
        if c.kind == "step":
            kind = f"step {c.step}"
        elif c.kind == "tombstone":
            kind = f"turn {c.reason}"
        count = str(c.message_count) if c.kind != "tombstone" else ""
        rows.append((c.id, c.created_at[:19].replace("T", " "), kind, count, c.label or ""))
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
        "messages": c.message_count,
    }
    if with_messages:
        data["output"] = c.output
        data["details"] = c.details
        data["messages"] = [m.to_dict() for m in c.messages]
    return data


def rollback_lines(result: Any) -> list[str]:
    lines = [
        f"restored {result.session} to checkpoint {result.restored.id} "
        f"({result.messages_before} → {result.messages_after} messages)"
    ]
    for comp in result.compensations:
        call = comp.call
        if comp.outcome is None:
            lines.append(f"  no compensating tool for {call.name}({_one_line(call.arguments, 80)})")
        else:
            mark = "✗" if comp.outcome.error else "✓"
            lines.append(
                f"  {mark} undo {call.name}({_one_line(call.arguments, 80)}): "
                f"{_one_line(comp.outcome.text, 100)}"
            )
    if result.undo_point:
        lines.append(f"undo this rollback with `koog rollback -s {result.session} --latest`")
    return lines


class ProgressBar:
    """A rich progress bar on a terminal's stderr; silent anywhere else."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        return self

    def update(self, done: int, total: int) -> None:
        if not is_tty(sys.stderr) or total < 2:
            return
        if self._progress is None:
            from rich.console import Console
            from rich.progress import Progress

            console = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))
            self._progress = Progress(console=console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def compress_dict(result: Any) -> dict[str, Any]:
    from koogcli.core.compression import estimate_tokens

    data = {
        "session": result.session,
        "strategy": result.strategy,
        "dry_run": result.dry_run,
        "changed": result.changed,
        "messages_before": len(result.before),
        "messages_after": len(result.after),
        "tokens_before": estimate_tokens(result.before),
        "tokens_after": estimate_tokens(result.after),
        "requests": result.requests,
        "checkpoint": result.checkpoint,
    }
    if result.dry_run:
        data["history"] = [m.to_dict() for m in result.after]
    return data


def compress_line(result: Any) -> str:
    data = compress_dict(result)
    if not result.changed:
        return f"{result.strategy}: nothing to keep was found; the history of {result.session} is unchanged"
    verb = "would compress" if result.dry_run else "compressed"
    line = (
        f"{verb} {result.session}: {data['messages_before']} → {data['messages_after']} messages, "
        f"~{data['tokens_before']} → ~{data['tokens_after']} tokens, {result.requests} request(s)"
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
    rows = [(f"{h.score:.3f}", h.record.id[:12], _one_line(h.record.content, 90)) for h in hits]
    return table(rows, ("SCORE", "ID", "CONTENT"))


def records_table(records: Sequence[Any]) -> str:
    rows = [
        (r.id[:12], r.namespace, r.created_at[:19].replace("T", " "), _one_line(r.content, 70))
        for r in records
    ]
    return table(rows, ("ID", "NAMESPACE", "CREATED", "CONTENT"))
