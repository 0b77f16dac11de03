"""Every write to stdout/stderr goes through here.

stdout carries results only (a reply, a listing, one JSON document); diagnostics go to
stderr. Plain text and no ANSI codes unless the stream is a terminal and NO_COLOR is unset.
rich is imported only where a terminal rendering needs it.

One escaping rule (SPEC §6: shown, never executed): whatever `out()` writes to a terminal
has its control characters shown (`visible()`), unless koog styled the text itself and
escaped the parts of it that came from outside; a listing of stored or outside text
(`table()`, the views) escapes whatever the stream; an export or a reply to a pipe or file
stays byte for byte what it is; JSON writes DEL and the C1 controls as `\\u` escapes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from koogcli.core.errors import EndpointNotConfiguredError, KoogError
from koogcli.ui.environment import current

if TYPE_CHECKING:  # kept out of start-up: `koog --help` needs none of them
    from koogcli.core.messages import Message, ToolCall
    from koogcli.core.ports import Usage
    from koogcli.core.results import Approval
    from koogcli.core.tool_ports import ToolOutcome


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# Terminals whose environment says they reflow lines on resize.
_REFLOWING_VARIABLES = (
    "TMUX",
    "VTE_VERSION",
    "KITTY_WINDOW_ID",
    "ALACRITTY_WINDOW_ID",
    "WEZTERM_PANE",
    "WT_SESSION",
    "KONSOLE_VERSION",
    "ITERM_SESSION_ID",
    "TERM_PROGRAM",
)
_CLIPPING_TERMS = ("linux", "vt100", "vt220")


def terminal_reflows(setting: str, env: Mapping[str, str] | None = None) -> bool:
    """`[chat] terminal_reflows`: "yes", "no", or "auto" (decided from the environment:
    xterm, GNU screen and the Linux console clip; every other terminal is taken to reflow,
    as nearly all of today's do)."""
    if setting in ("yes", "no"):
        return setting == "yes"
    env = current().variables if env is None else env
    if any(env.get(name) for name in _REFLOWING_VARIABLES):
        return True
    term = env.get("TERM", "")
    return not (env.get("XTERM_VERSION") or env.get("STY") or term in _CLIPPING_TERMS)


def color_ok(stream: TextIO) -> bool:
    return is_tty(stream) and not current().no_color


def emphasis(stream: TextIO | None = None) -> Callable[[str], str]:
    """How to mark found words on `stream`: reverse video on a colour terminal, else as is."""
    if color_ok(stream or current().stdout):
        return lambda text: f"\x1b[7m{text}\x1b[27m"
    return lambda text: text


def out(text: str, stream: TextIO | None = None, styled: bool = False) -> None:
    """Write a line. On a terminal its control characters are shown, never executed,
    unless `styled`: koog's own escape codes are in it and the caller escaped every part
    that came from outside (a message, a file name, a model id)."""
    stream = stream or current().stdout
    if not styled and is_tty(stream):
        text = visible(text)
    try:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
    except BrokenPipeError:
        if stream is not current().stdout:
            raise
        silence_stdout()  # `koog ... | head`: the reader has all it wanted


def json_out(data: object) -> None:
    out(json_text(data))


_JSON_CONTROLS = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def json_text(data: object, indent: int | None = 2) -> str:
    """JSON as koog writes it: text readable (not ASCII-escaped), control characters as
    `\\u` escapes, DEL and C1 too (json escapes only C0): a raw U+009B is valid JSON but a
    CSI to a terminal that shows the document. Outside strings JSON is ASCII, so the
    translation touches string contents only."""
    return json.dumps(data, ensure_ascii=False, indent=indent).translate(_JSON_CONTROLS)


def read_stdin(limit: int | None = None, setting: str = "chat.max_input_bytes") -> str:
    """All of standard input as UTF-8 text; anything else is a usage error, not a crash.
    With `limit`, no more than that is ever read (more is a usage error: memory stays
    bounded by what koog keeps, not by what was piped in)."""
    from koogcli.core.errors import UsageError

    stdin = current().stdin.buffer
    data = stdin.read() if limit is None else stdin.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise UsageError(
            f"standard input is more than {limit:,} bytes, over {setting}",
            hint=f"send less, or raise {setting}",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"standard input is not UTF-8 text (byte {exc.start})",
            hint="convert it first, e.g. with iconv",
        ) from exc


def note(text: str) -> None:
    """A diagnostic line on stderr, dimmed on a colour terminal; the text from outside it
    may carry (a client's tool call, a file name a model chose) shown, never executed."""
    text = visible(text)
    if color_ok(current().stderr):
        text = f"\x1b[2m{text}\x1b[0m"
    out(text, current().stderr, styled=True)


def usage_line(usage: Usage | None) -> None:
    """`-u`: token counts on stderr, whatever stdout carries, and how many prompt tokens
    the server's cache served when it said so (plain numbers, as scripts read them)."""
    if usage is None:
        note("tokens: not reported by the server")
        return
    line = f"tokens: {usage.prompt_tokens} in, {usage.completion_tokens} out"
    cache = cache_words(usage, grouped=False)
    note(line if cache is None else f"{line}; {cache}")


def cache_words(usage: Usage | None, grouped: bool = True) -> str | None:
    """`prompt cache: N of M tokens reused` (§5.4a); None when the server reported no
    cached figure (many do not), which is not the same as reporting 0."""
    if usage is None or usage.cached_tokens is None:
        return None
    n, m = (
        (f"{usage.cached_tokens:,}", f"{usage.prompt_tokens:,}")
        if grouped
        else (str(usage.cached_tokens), str(usage.prompt_tokens))
    )
    return f"prompt cache: {n} of {m} tokens reused"


def warning(text: str) -> None:
    out(f"koog: warning: {visible(text)}", current().stderr)


def error(err: KoogError) -> None:
    if isinstance(err, EndpointNotConfiguredError):
        out(FIRST_RUN_GUIDE, current().stderr)
        return
    out(f"koog: error: {visible(err.message)}", current().stderr)
    if err.hint:
        out(f"koog: hint: {visible(err.hint)}", current().stderr)


def internal_error(exc: BaseException) -> None:
    err_stream = current().stderr
    out(f"koog: internal error: {type(exc).__name__}: {visible(str(exc))}", err_stream)
    out("koog: hint: rerun with KOOG_DEBUG=1 for a traceback, and report it", err_stream)


FIRST_RUN_GUIDE = """\
koog: no model endpoint configured (no API key, no base URL, no local server answering
on ports 11434, 1234 or 8080). Set one of these, then run `koog chat` again:
  export OPENAI_API_KEY=sk-...                       # OpenAI
  export OPENAI_BASE_URL=http://127.0.0.1:11434/v1   # a local server (Ollama, llama.cpp, vLLM)
Or put this in the config file (`koog config init` writes one, `koog config path` names it):

[llm]
base_url = "http://127.0.0.1:8080/v1"
model = "my-model"
api_key_env = "MY_KEY_VAR"

`koog config show` prints the settings in effect.\
"""


def format_messages(
    messages: Sequence[Message],
    fmt: str,
    tokens: Sequence[int] | None = None,
    fold_system: bool = False,
) -> str:
    """`tokens`, when given, are estimates per message: a `tokens` field in JSON, a
    `~N tokens` note on each label in text and markdown. `fold_system`: a system prompt of
    more than one line is one line in text and markdown (an agent's runs to 100 lines)."""
    counts: Sequence[int | None] = tokens if tokens is not None else [None] * len(messages)
    if fmt in ("json", "jsonl"):
        dicts = [
            m.to_dict() if n is None else {**m.to_dict(), "tokens": n}
            for m, n in zip(messages, counts, strict=True)
        ]
        if fmt == "json":
            return json_text(dicts)
        return "\n".join(json_text(d, indent=None) for d in dicts)
    blocks = [
        _message_block(_folded(m) if fold_system else m, fmt == "markdown", n)
        for m, n in zip(messages, counts, strict=True)
    ]
    return ("\n\n" if fmt == "markdown" else "\n").join(blocks)


def _folded(m: Message) -> Message:
    text = m.text
    if m.role != "system" or ("\n" not in text.strip() and len(text) <= 200):
        return m
    first = " ".join(text.split("\n", 1)[0].split())[:100]
    lines = len(text.strip().splitlines())
    return m.with_content(
        f"{first} … ({lines:,} lines, {len(text):,} characters; --system shows it whole)"
    )


def _message_block(m: Message, markdown: bool, tokens: int | None = None) -> str:
    from koogcli.core import content_parts
    from koogcli.core.agent_edits import EDITS_KEY
    from koogcli.core.messages import CUT_LABELS, FINISH_KEY

    label = m.role if m.role != "tool" else f"tool {m.name or ''}".rstrip()
    if m.meta.get("kind"):
        label += f" ({m.meta['kind']})"
    if m.meta.get("cancelled"):
        label += " (cancelled)"
    cut = CUT_LABELS.get(str(m.meta.get(FINISH_KEY)))
    if cut is not None:
        label += f" ({cut})"
    if tokens is not None:
        label += f" ~{tokens:,} tokens"
    lines = [m.text] if m.text else []
    shown = content_parts.labels(m)  # `[image: image/png, 34 KB]`, after the text
    lines += [""] if shown and lines and markdown else []  # a paragraph of their own
    lines += shown
    lines += [f"→ {c.name}({c.arguments})" for c in m.tool_calls]
    edits = m.meta.get(EDITS_KEY)
    lines += [f"  {e}" for e in edits if isinstance(e, str)] if isinstance(edits, list) else []
    body = visible("\n".join(lines))
    label = visible(label)  # a client's tool name is text from outside too
    if markdown:
        return f"### {label}\n\n{body}"
    indented = body.replace("\n", "\n    ")
    return f"[{label}] {indented}"


def _visible_forms() -> dict[int, str]:
    forms = {c: f"^{chr(c + 64)}" for c in range(0x20) if chr(c) not in "\n\t"}
    forms[0x7F] = "^?"
    forms.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})  # C1: \x9b is a CSI
    return forms


_VISIBLE = _visible_forms()


def visible(text: str) -> str:
    """Stored text as a terminal may show it (SPEC §6: shown, never executed): every control
    character but newline and tab written visibly, ESC as `^[`, CR as `^M`, a C1 control as
    `\\x9b`, so no message, reply or record can set the title, write the clipboard, clear
    the screen or overwrite a line just printed."""
    return text.translate(_VISIBLE)


def one_line(text: str, limit: int = 120) -> str:
    flat = " ".join(visible(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tool_call_line(call: ToolCall) -> str:
    return f"→ {call.name}({one_line(call.arguments, 100)})"


def tool_result_line(outcome: ToolOutcome) -> str:
    return f"{'✗' if outcome.error else '←'} {one_line(outcome.text)}"


def table(rows: Iterable[Sequence[str]], headers: Sequence[str]) -> str:
    """Columns of cells, each shown visibly (a listing names stored or outside text: a
    label, a file name a model chose), to a terminal or not."""
    data = [list(headers), *[[visible(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in data) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in data
    )


def silence_stdout() -> None:
    """The reader of stdout went away (`| head`): send the rest nowhere, so neither the
    turn nor Python's flush at exit fails on a broken pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # not a real file descriptor (tests): nothing more will be written anyway
    finally:
        os.close(devnull)


def approval_question(call: ToolCall, undo: bool = False) -> str:
    """A turn's call is already on screen; a compensation is shown whole."""
    what = f"undo {call.name}({one_line(call.arguments, 100)})" if undo else f"run {call.name}"
    return f"{what}? [y]es / [n]o / [a]lways for {call.name} in this session: "


def approval_declined(call: ToolCall, undo: bool = False) -> str:
    """The line a Ctrl-D answer leaves: the question is answered, visibly, with no."""
    return f"declined (Ctrl-D): {call.name} was not {'undone' if undo else 'run'}"


def ask_tool(call: ToolCall, stream: TextIO | None = None, undo: bool = False) -> Approval:
    """Read y / n / a (always this tool, this session): one key on a terminal, no Enter
    (Ctrl-D declines); a line elsewhere."""
    stream = stream or current().stdin
    err = current().stderr
    if is_tty(stream):
        from koogcli.ui.keypress import choose

        err.write(visible(approval_question(call, undo)))
        err.flush()
        found = choose(stream, _ANSWERS)
        err.write(f"{found}\n" if found else f"\n{visible(approval_declined(call, undo))}\n")
        err.flush()
        return _ANSWERS[found] if found else "n"
    while True:
        err.write(visible(approval_question(call, undo)))
        err.flush()
        line = stream.readline()
        if not line:
            return "n"
        answer = _ANSWERS.get(line.strip().lower()[:1])
        if answer is not None:
            return answer


_ANSWERS: dict[str, Approval] = {"y": "y", "n": "n", "a": "a"}


class Pausable(Protocol):
    def pause(self) -> None: ...


def tool_approver(
    undo: bool = False, writer: Pausable | None = None
) -> Callable[[ToolCall], Approval] | None:
    """An approval callback when stdin is a terminal; None elsewhere (calls are refused).
    A reply being shown is paused first, so the question is not drawn inside it."""
    if not is_tty(current().stdin):
        return None

    def approve(call: ToolCall) -> Approval:
        if writer is not None:
            writer.pause()
        return ask_tool(call, undo=undo)

    return approve


class ProgressBar:
    """A rich progress bar on a terminal's stderr; silent anywhere else. A single request
    has no steps to count: a spinner and the seconds it has run show it is under way."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        return self

    def update(self, done: int, total: int) -> None:
        if not is_tty(current().stderr) or total < 1:
            return
        if self._progress is None:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            console = Console(file=current().stderr, no_color=current().no_color)
            columns = (
                (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
                if total < 2
                else Progress.get_default_columns()
            )
            self._progress = Progress(*columns, console=console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(visible(self.label), total=total)
        self._progress.update(self._task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
