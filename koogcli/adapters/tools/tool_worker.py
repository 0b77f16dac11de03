"""Running one tool call in a process of its own, so that nothing it does reaches past koog.

A tool is user code. Run in koog's process it could write to file descriptor 1 (directly,
or through any program it starts) and mix that into a reply on stdout, end the process
with `os._exit()` or a signal (koog exiting 0 with nothing written, and every `--resume`
running it again), or run past its time limit for good. So each call runs in a forked
child, in a process group of its own:

- The child's file descriptor 1 is its stderr: whatever the tool or its children print
  goes where diagnostics go, never into a pipeline's stdout.
- The result comes back through a pipe as one JSON document, cut to `max_bytes` with a
  note saying how much was cut. A child that ends without sending one ended its own
  process: that is the tool's error ("ended its process with exit status 0"), told to the
  model and the user, never the end of koog.
- Past the time limit, or when koog is interrupted (Ctrl-C), the whole process group is
  killed: the limit stops the tool for real. A koog that is killed takes its tool along
  (Linux's parent-death signal): a tool never goes on to have its effect after the turn
  that called it is gone, and a resume runs it afresh. A compensation is the exception
  (`outlive`): once a rollback has restored the history the undo is owed, so its process
  finishes and leaves its receipt for the next koog (adapters/tools/outliving.py).

A tool therefore keeps no state in memory from one call to the next (each call starts
from koog's state at the moment of the call); state belongs in files or a database.
Where `os.fork` is missing, the call runs in a thread of koog's process instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from koogcli.adapters.tools import outliving
from koogcli.core import receipts
from koogcli.core.tool_ports import ToolOutcome

Render = Callable[[object], str]


def run(
    name: str,
    function: Callable[..., object],
    kwargs: Mapping[str, object],
    render: Render,
    timeout: float,
    max_bytes: int,
    receipt: Path | None = None,
    outlive: bool = False,
) -> ToolOutcome:
    """`receipt`: the child writes its result there durably before sending it (a koog
    killed between the two resumes with the result instead of running the call again).
    `outlive` (with a receipt): the child is not killed when koog dies, and holds the lock
    that tells the next koog it is still running (adapters/tools/outliving.py)."""
    if not hasattr(os, "fork"):
        return _in_thread(name, function, kwargs, render, timeout, max_bytes, receipt)
    # The child holds this lock while it lives: a koog that finds its receipt missing waits
    # for it (a call that returned may still be writing its receipt; a compensation that
    # outlives koog, still running).
    lock = outliving.hold(receipt) if receipt is not None else None
    try:
        return _forked(name, function, kwargs, render, timeout, max_bytes, receipt, lock, outlive)
    finally:
        if lock is not None:  # the child is gone: its receipt says the rest
            outliving.release(lock, receipt or Path())


def _forked(
    name: str,
    function: Callable[..., object],
    kwargs: Mapping[str, object],
    render: Render,
    timeout: float,
    max_bytes: int,
    receipt: Path | None,
    lock: int | None,
    outlive: bool,
) -> ToolOutcome:
    read_end, write_end = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        if not outlive:
            _die_with(parent)
        if lock is not None:
            outliving.mark(lock)
        _child(write_end, function, kwargs, render, max_bytes, receipt)
    os.close(write_end)
    try:
        data, finished = _collect(read_end, timeout, max_bytes)
    except BaseException:  # Ctrl-C: the tool stops with the turn
        _kill(pid)
        raise
    finally:
        os.close(read_end)
    if not finished:
        _kill(pid)
        return ToolOutcome(
            f"Error: {name} did not finish within {timeout:g}s and was stopped", True
        )
    status = _reap(pid)
    outcome = _parse(data)
    if outcome is not None:
        return outcome
    return ToolOutcome(
        f"Error: {name} ended its own process ({_how(status)}) before returning a result; "
        "whether it had its effect is unknown",
        True,
    )


def write_receipt(path: Path, data: bytes) -> None:
    """The result, durably (written whole, synced, renamed into place, folder synced)."""
    from koogcli.adapters import atomic

    atomic.write_text(path, data)


def truncated(text: str, max_bytes: int) -> str:
    """`text` cut to `max_bytes` of UTF-8, with a note saying how much was cut."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    kept = data[:max_bytes].decode("utf-8", "ignore")
    cut = len(data) - len(kept.encode("utf-8"))
    return (
        f"{kept}\n[koog: the result was {len(data):,} bytes; the last {cut:,} were cut "
        f"(tool_settings.max_result_bytes = {max_bytes:,})]"
    )


def _child(
    pipe: int,
    function: Callable[..., object],
    kwargs: Mapping[str, object],
    render: Render,
    max_bytes: int,
    receipt: Path | None,
) -> None:
    code = 0
    try:
        os.setpgid(0, 0)  # a group of its own: killed whole, with what it started
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.dup2(2, 1)  # what the tool or its children print goes to stderr
        sys.stdout = sys.stderr = os.fdopen(os.dup(2), "w", buffering=1, closefd=True)
        try:
            value = function(**kwargs)
            _live_on()  # it returned: its receipt is written even if koog dies from now on
            outcome = {"text": truncated(render(value), max_bytes), "error": False}
        except BaseException as exc:  # even sys.exit() is only the tool's error
            _live_on()  # (rendering the result was the first thing to do after returning)
            text = truncated(f"Error: {type(exc).__name__}: {exc}", max_bytes)
            outcome = {"text": text, "error": True}
        data = json.dumps(outcome, ensure_ascii=False).encode("utf-8", "surrogatepass")
        if receipt is not None:
            with contextlib.suppress(BaseException):  # no receipt: still the result, sent
                write_receipt(receipt, data)
        view = memoryview(data)
        while view:
            view = view[os.write(pipe, view) :]
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _die_with(parent: int) -> None:
    """The child is killed when koog dies (prctl PR_SET_PDEATHSIG where Linux has it)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # koog died before the signal was asked for
        os._exit(70)


def _live_on() -> None:
    """The call has returned: no parent-death signal any more, so a koog killed from here
    on finds the receipt (it is in doubt only while it runs)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG off
    except (OSError, AttributeError):
        return


def _collect(fd: int, timeout: float, max_bytes: int) -> tuple[bytes, bool]:
    """What the child sent, until it closed the pipe (True) or the time ran out (False).
    Reading stops at a bound, so a child cannot make koog hold more than it keeps."""
    bound = max_bytes * 6 + 4096  # JSON may escape a character into six bytes
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), True
        size += len(chunk)
        if size <= bound:
            chunks.append(chunk)


def _parse(data: bytes) -> ToolOutcome | None:
    return receipts.decode(data)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _reap(pid: int) -> int:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"signal {signal.Signals(number).name}"
        except ValueError:
            return f"signal {number}"
    return f"exit status {os.WEXITSTATUS(status)}"


def _in_thread(
    name: str,
    function: Callable[..., object],
    kwargs: Mapping[str, object],
    render: Render,
    timeout: float,
    max_bytes: int,
    receipt: Path | None = None,
) -> ToolOutcome:
    done: list[ToolOutcome] = []

    def call() -> None:
        try:
            outcome = ToolOutcome(truncated(render(function(**kwargs)), max_bytes))
        except BaseException as exc:
            outcome = ToolOutcome(f"Error: {type(exc).__name__}: {exc}", True)
        if receipt is not None:
            write_receipt(receipt, receipts.encode(outcome.text, outcome.error))
        done.append(outcome)

    with contextlib.redirect_stdout(sys.stderr):
        worker = threading.Thread(target=call, name=f"tool {name}", daemon=True)
        worker.start()
        worker.join(timeout)
    if not done:
        return ToolOutcome(f"Error: {name} did not finish within {timeout:g}s", True)
    return done[0]
