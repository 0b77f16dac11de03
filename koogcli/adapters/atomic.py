"""The only way koog writes data files.

- `write_text`: temp file in the same folder (O_EXCL, 0600), fsync, rename, fsync the
  folder. A crash at any instant leaves the old or the new document, never a torn one.
- `append_line`: O_APPEND writes of whole lines at 0600 (the transcript); a reader ignores
  a torn last line.
- `file_lock`: an inter-process lock (filelock, imported only on write paths); a timeout
  becomes LockTimeoutError (exit 3).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from koogcli.adapters.paths import ensure_dir
from koogcli.core.errors import CorruptDocumentError, LockTimeoutError, StorageError


def write_text(path: Path, text: str) -> None:
    ensure_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        _fsync_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror}") from exc


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path: Path, line: str) -> None:
    append_text(path, line.rstrip("\n") + "\n")


def append_text(path: Path, text: str) -> None:
    """One write of whole lines, synced, at 0600."""
    ensure_dir(path.parent)
    data = text.encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot append to {path}: {exc.strerror}") from exc


def remove(path: Path) -> bool:
    """Delete a file; False if it was not there."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"cannot delete {path}: {exc.strerror}") from exc
    return True


def read_json(path: Path) -> object:
    """Parse a JSON document; a parse failure names the file and line and changes nothing."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDocumentError(f"{path} is not UTF-8 text", hint=_KEEP) from exc
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptDocumentError(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})", hint=_KEEP
        ) from exc


_KEEP = (
    "koog never overwrites it; move it aside or restore it from a backup or `koog history import`"
)
CORRUPT_HINT = _KEEP


@contextmanager
def file_lock(path: Path, timeout: float = 30.0) -> Iterator[None]:
    import filelock

    ensure_dir(path.parent)
    lock = filelock.FileLock(str(path), timeout=timeout, mode=0o600)
    try:
        lock.acquire()
    except filelock.Timeout as exc:
        raise LockTimeoutError(
            f"timed out after {timeout:g}s waiting for the lock {path}",
            hint="another koog process is writing this session; retry when it is done",
        ) from exc
    try:
        yield
    finally:
        lock.release()


@contextmanager
def shared_or_exclusive(path: Path, exclusive: bool, timeout: float = 30.0) -> Iterator[None]:
    """An inter-process reader/writer lock (flock): many shared holders, or one exclusive.

    Turns hold it shared for their life; resuming a turn holds it exclusive, so a resume
    never runs beside a live turn of the same session, whatever the pids say.
    """
    import fcntl
    import time

    ensure_dir(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot open the lock {path}: {exc.strerror}") from exc
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"timed out after {timeout:g}s waiting for the lock {path}",
                        hint="another koog process is running a turn in this session; "
                        "retry when it is done",
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)
