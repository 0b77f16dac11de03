"""The only way koog writes data files.

- `write_text`: temp file in the same folder (O_EXCL, 0600), fsync, rename, fsync the
  folder. A crash at any instant leaves the old or the new document, never a torn one.
  Without `sync` the fsyncs are skipped: still whole after a killed process, for documents
  a later synced write supersedes.
- `append_text`: O_APPEND writes of whole lines at 0600 (a session's log); a torn last line
  is closed off before the next append.
- `file_lock`, `shared_or_exclusive`: inter-process locks (fcntl.flock, released by the
  kernel when a process dies); a timeout becomes LockTimeoutError (exit 3).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from koogcli.adapters.paths import ensure_dir, symlink_error
from koogcli.core.errors import CorruptDocumentError, LockTimeoutError, StorageError

# Temp files a killed process left behind; older than this they are certainly orphans.
ORPHAN_AGE_SECONDS = 3600.0


def _failure(action: str, path: Path, exc: OSError) -> StorageError:
    if exc.errno == errno.ELOOP:
        return symlink_error(path)
    return StorageError(f"cannot {action} {path}: {exc.strerror}")


def read_failure(path: Path, exc: OSError) -> StorageError:
    return _failure("read", path, exc)


def read_bytes(path: Path, limit: int | None = None, offset: int = 0) -> bytes:
    """A file (or `limit` bytes of it from `offset`), never through a symbolic link;
    FileNotFoundError passes through."""
    try:
        with open_binary(path) as handle:
            handle.seek(offset)
            return handle.read() if limit is None else handle.read(limit)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _failure("read", path, exc) from exc


def open_binary(path: Path) -> BinaryIO:
    """A file opened for reading, never through a symbolic link; FileNotFoundError passes
    through."""
    try:
        # O_NONBLOCK: a FIFO put in a file's place must not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _failure("read", path, exc) from exc
    try:
        kind = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise _failure("read", path, exc) from exc
    if not stat.S_ISREG(kind):
        os.close(fd)
        what = "a folder" if stat.S_ISDIR(kind) else "not a regular file"
        raise StorageError(
            f"cannot read {path}: it is {what}, where koog keeps a file",
            hint="move it aside; koog never reads or removes it",
        )
    return os.fdopen(fd, "rb")


_SWEPT: set[Path] = set()


def write_text(path: Path, text: str | bytes, sync: bool = True) -> None:
    """`sync=False` keeps the atomic rename but skips the fsyncs: for documents a later,
    synced write supersedes (a killed process loses nothing the kernel already has).
    Bytes are written as they are (UTF-8 already)."""
    ensure_dir(path.parent)
    if path.parent not in _SWEPT:  # once per folder and process: cheap, and enough
        _SWEPT.add(path.parent)
        import time

        remove_orphan_temp_files(path.parent, time.time())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8") if isinstance(text, str) else text)
                handle.flush()
                if sync:
                    os.fsync(handle.fileno())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        if sync:
            _fsync_dir(path.parent)
    except OSError as exc:
        raise _failure("write", path, exc) from exc


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_text(path: Path, text: str, sync: bool = True, torn_mark: str | None = None) -> None:
    """One write of whole lines, synced, at 0600. A torn last line left by a crash (or a full
    disk) is closed off first, so it stays one unreadable line that readers skip instead of
    swallowing the lines appended after it; with `torn_mark`, that line follows it, so a
    reader tells a line a crash cut short from one damaged later."""
    ensure_dir(path.parent)
    data = text.encode("utf-8")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                mark = f"{torn_mark}\n".encode() if torn_mark is not None else b""
                data = b"\n" + mark + data
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _failure("append to", path, exc) from exc


def remove(path: Path) -> bool:
    """Delete a file; False if it was not there. A symbolic link where koog expects its own
    file is an error (the user must see it), never silently removed or followed."""
    if path.is_symlink():
        raise symlink_error(path)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _failure("delete", path, exc) from exc
    return True


def remove_orphan_temp_files(folder: Path, now: float) -> int:
    """Temp files (`.NAME.PID.RANDOM.tmp`) older than an hour: left by killed processes."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if entry.is_file(follow_symlinks=False) and now - info.st_mtime > ORPHAN_AGE_SECONDS:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue  # another process got there first, or it is not ours to remove
    return removed


def json_text(value: object) -> str:
    """`json.dumps(value, ensure_ascii=False)`'s JSON, by orjson (several times faster: an
    import writes a hundred thousand messages), compact; what orjson refuses (a lone
    surrogate, an integer past 64 bits) by `json`."""
    import orjson

    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False)


def parse_json(data: bytes, path: Path) -> object:
    """A document koog wrote, parsed by orjson (a 50,000-message session in less than half
    the time); one orjson refuses is parsed again by `json`, whose errors name the line."""
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDocumentError(f"{path} is not UTF-8 text", hint=_KEEP) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptDocumentError(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg})", hint=_KEEP
        ) from exc
    except (RecursionError, ValueError) as exc:  # nesting too deep, numbers too long
        raise CorruptDocumentError(
            f"{path} is not a JSON document koog can read: {exc}", hint=_KEEP
        ) from exc


_KEEP = (
    "koog never overwrites it; move it aside or restore it from a backup or `koog history import`"
)
CORRUPT_HINT = _KEEP


@contextmanager
def file_lock(
    path: Path, timeout: float = 30.0, holder: str = "writing this session"
) -> Iterator[None]:
    """An exclusive inter-process lock held while a session's files are written (flock:
    released by the kernel when the process dies, so a killed writer never blocks)."""
    with _flock(path, exclusive=True, timeout=timeout, holder=holder):
        yield


@contextmanager
def shared_or_exclusive(path: Path, exclusive: bool, timeout: float = 30.0) -> Iterator[None]:
    """An inter-process reader/writer lock (flock): many shared holders, or one exclusive.

    Turns hold it shared for their life; resuming a turn holds it exclusive, so a resume
    never runs beside a live turn of the same session, whatever the pids say.
    """
    with _flock(path, exclusive, timeout, holder="running a turn in this session"):
        yield


@contextmanager
def _flock(path: Path, exclusive: bool, timeout: float, holder: str) -> Iterator[None]:
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
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"timed out after {timeout:g}s waiting for the lock {path}",
                        hint=f"another koog process is {holder}; retry when it is done",
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        yield
    finally:
        os.close(fd)


def rename(source: Path, target: Path) -> bool:
    """Move a file or folder koog owns; False if there was nothing to move. Refuses links
    and never replaces an existing target."""
    if source.is_symlink():
        raise symlink_error(source)
    if not source.exists():
        return False
    if target.exists() or target.is_symlink():
        raise StorageError(f"cannot move {source} to {target}: the target exists")
    ensure_dir(target.parent)
    try:
        os.rename(source, target)
    except OSError as exc:
        raise _failure("move", source, exc) from exc
    _fsync_dir(target.parent)
    return True
