"""A call's or compensation's process and the lock that says it still runs (SPEC §5.18:
exactly once). A compensation's process outlives the koog that started it.

A tool call dies with koog (a resume runs it afresh). A compensation must not: once a
rollback has restored the history, the undo is owed, and one killed halfway cannot be told
from one that had its effect. So a compensation's process is not killed when koog dies; it
finishes, writes its receipt (its result, durably) and ends. Whoever finishes the rollback
next waits for it and records that result instead of running it again.

How the next koog knows the process is still there: the process holds an exclusive flock on
`<receipt>.lock` for its whole life (the lock is taken by koog before the fork and shared
with the child; the kernel drops it when the last holder ends), with its pid written in the
file. Free lock and no receipt: the compensation never returned (koog died before starting
it, or it was stopped while it ran): in doubt. Held past the tool's time limit: the process
group is killed, which makes it in doubt too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from koogcli.adapters.paths import ensure_dir
from koogcli.core import receipts
from koogcli.core.errors import StorageError
from koogcli.core.tool_ports import ToolOutcome


def lock_path(receipt: Path) -> Path:
    return receipt.with_name(receipt.name.removesuffix(".json") + ".lock")


def hold(receipt: Path) -> int:
    """The lock a compensation's process keeps while it runs (an open fd, locked).

    Taken before the fork: a koog killed at any instant after this leaves the lock held by
    the process that runs the compensation, or by nobody (then it never started)."""
    path = lock_path(receipt)
    ensure_dir(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot open {path}: {exc.strerror}") from exc
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageError(
            f"{path} is held: this call or compensation is running in another process",
            hint="run the command again when it is done",
        ) from None
    except OSError as exc:
        os.close(fd)
        raise StorageError(f"cannot lock {path}: {exc.strerror}") from exc
    return fd


def mark(fd: int) -> None:
    """In the child: the pid that holds the lock, for a koog that must stop it."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)


def release(fd: int, receipt: Path) -> None:
    """The call's process is gone: its lock goes (unlinked while still held, so a waiter
    that opened it before sees it free and reads the receipt)."""
    with contextlib.suppress(OSError):
        lock_path(receipt).unlink(missing_ok=True)
    os.close(fd)


def forget(receipt: Path) -> None:
    """The receipt's result is recorded: it goes, and its session's folder once empty."""
    with contextlib.suppress(OSError):
        receipt.unlink(missing_ok=True)
        receipt.parent.rmdir()


def settle(receipt: Path, timeout: float) -> ToolOutcome | None:
    """The result of a compensation started by a koog that died: waits (up to `timeout`)
    for its process to end, stops it past that, then reads its receipt. None: it never
    returned, so whether it had its effect is unknown (in doubt)."""
    path = lock_path(receipt)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _read(receipt)
    except OSError as exc:
        raise StorageError(f"cannot open {path}: {exc.strerror}") from exc
    try:
        if not _wait(fd, timeout):
            _stop(fd)
            if not _wait(fd, 10.0):
                raise StorageError(
                    f"a compensation's process holding {path} cannot be stopped",
                    hint="end it, then run the rollback again",
                )
        with contextlib.suppress(OSError):  # held by no process now: it goes
            path.unlink(missing_ok=True)
        return _read(receipt)
    finally:
        os.close(fd)


def _wait(fd: int, timeout: float) -> bool:
    import fcntl

    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        except OSError as exc:
            raise StorageError(f"cannot lock a receipt's lock: {exc.strerror}") from exc


def _stop(fd: int) -> None:
    """Kill the process group whose pid the lock file names: the lock was still held a
    moment ago, so that pid is the compensation's process (the child writes it first)."""
    try:
        pid = int(os.pread(fd, 32, 0).decode() or "0")
    except (OSError, ValueError):
        return
    if pid > 1:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)


def _read(receipt: Path) -> ToolOutcome | None:
    try:
        return receipts.decode(receipt.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {receipt}: {exc.strerror}") from exc
