"""The edit journal of agent sessions, in the data dir whatever the storage backend: the
files it is about are on this machine (koog serve reads them as the agent's user does).

- `edits/sessions/NAME.jsonl`: the session's events (core/agent_edits.py), one JSON line
  each, appended and synced; a torn last line is skipped.
- `edits/contents/SHA256`: each content once, 0600; a session's forget removes the
  contents no other journal names.

The agent's own files are read and written from `/` one folder at a time through
descriptors, never following a symbolic link (`_parent`): a folder swapped for a link
between a check and a write (an agent, or another user owning the folder) cannot lead a
read or a write anywhere else, and the temporary file of a write is made and removed in
the folder that was opened.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.paths import DataDir
from koogcli.core.agent_edits import FileLook
from koogcli.core.names import SessionName


class FileAgentFiles:
    def __init__(self, data: DataDir) -> None:
        self.data = data

    # --- the journal -----------------------------------------------------------------

    def record(self, session: SessionName, events: Sequence[Mapping[str, object]]) -> None:
        if events:
            lines = "".join(json.dumps(dict(e), ensure_ascii=False) + "\n" for e in events)
            atomic.append_text(self.data.edit_journal_file(session), lines)

    def events(self, session: SessionName) -> list[dict[str, object]]:
        path = self.data.edit_journal_file(session)
        try:
            text = atomic.read_bytes(path).decode("utf-8", "surrogateescape")
        except FileNotFoundError:
            return []
        found: list[dict[str, object]] = []
        offset = 0
        for line in text.split("\n"):
            start, offset = offset, offset + len(line.encode("utf-8", "surrogateescape")) + 1
            try:
                parsed = json.loads(line)
            except (ValueError, RecursionError):  # a line a crash tore, or the end
                continue
            if isinstance(parsed, dict):
                found.append({**parsed, "_offset": start})
        return found

    def position(self, session: SessionName) -> int:
        try:
            return self.data.edit_journal_file(session).stat().st_size
        except FileNotFoundError:
            return 0

    def has_journal(self, session: SessionName) -> bool:
        return self.data.edit_journal_file(session).exists()

    def keep(self, content: bytes) -> str:
        digest = hashlib.sha256(content).hexdigest()
        path = self.data.edit_content_file(digest)
        if not path.exists():
            atomic.write_text(path, content)
        return digest

    def kept(self, digest: str) -> bytes | None:
        try:
            content = atomic.read_bytes(self.data.edit_content_file(digest))
        except FileNotFoundError:
            return None
        return content if hashlib.sha256(content).hexdigest() == digest else None

    def forget(self, session: SessionName) -> None:
        atomic.remove(self.data.edit_journal_file(session))
        folder = self.data.edit_journal_file(session).parent
        named: set[str] = set()
        for journal in folder.glob("*.jsonl") if folder.exists() else ():
            named.update(_digests(journal))
        contents = self.data.edit_content_file("0" * 64).parent
        for kept in contents.iterdir() if contents.exists() else ():
            if kept.name not in named and not kept.name.startswith("."):
                atomic.remove(kept)

    def copy(self, source: SessionName, target: SessionName) -> None:
        try:
            text = atomic.read_bytes(self.data.edit_journal_file(source))
        except FileNotFoundError:
            return
        if text.strip():
            atomic.append_text(self.data.edit_journal_file(target), text.decode("utf-8", "replace"))

    # --- the agent's files -----------------------------------------------------------

    def real(self, path: str) -> str:
        try:
            return os.path.realpath(path)
        except (ValueError, OSError):  # a NUL in a model-written path
            return "\0"

    def look(self, path: str, limit: int) -> FileLook:
        try:
            with _parent(path, create=False) as (folder, name):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except FileNotFoundError:
            return FileLook(False)
        except OSError as exc:
            return FileLook(True, problem=_problem(exc))
        except ValueError:  # a NUL in a model-written path
            return FileLook(True, problem="not a path")
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return FileLook(True, size=info.st_size, problem="not a regular file")
            if info.st_size > limit:
                return FileLook(True, size=info.st_size)
            with os.fdopen(fd, "rb", closefd=False) as handle:
                content = handle.read(limit + 1)
        except OSError as exc:
            return FileLook(True, problem=_problem(exc))
        finally:
            os.close(fd)
        if len(content) > limit:  # it grew while read
            return FileLook(True, size=len(content))
        return FileLook(True, hashlib.sha256(content).hexdigest(), len(content), content)

    def put(self, path: str, content: bytes | None) -> None:
        try:
            with _parent(path, create=content is not None) as (folder, name):
                if content is None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=folder)
                else:
                    _replace(folder, name, content)
        except FileNotFoundError:
            if content is not None:
                raise
        except OSError as exc:
            raise OSError(exc.errno, _problem(exc)) from exc


@contextlib.contextmanager
def _parent(path: str, create: bool) -> Iterator[tuple[int, str]]:
    """The file's folder, opened from / one component at a time, none of them followed if
    it is a symbolic link (`O_NOFOLLOW | O_DIRECTORY` on each, relative to the one before):
    what is checked is what is used, however the folders change meanwhile. Missing folders
    are made when `create` (each made, then opened, the same way)."""
    parts = [p for p in path.split("/") if p]
    if not path.startswith("/") or not parts or ".." in parts or "." in parts:
        raise OSError(errno.EINVAL, "not an absolute, normalised path")
    folder = os.open("/", _FOLDER)
    try:
        for part in parts[:-1]:
            try:
                inner = _open_folder(part, folder)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=folder)
                inner = _open_folder(part, folder)
            os.close(folder)
            folder = inner
        yield folder, parts[-1]
    finally:
        os.close(folder)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_folder(name: str, folder: int) -> int:
    try:
        return os.open(name, _FOLDER, dir_fd=folder)
    except NotADirectoryError:  # Linux's answer for a link opened with O_NOFOLLOW too
        raise OSError(errno.ELOOP, "not a folder") from None


def _replace(folder: int, name: str, content: bytes) -> None:
    """Write `name` in `folder` whole: a temporary file beside it, made and removed through
    the same descriptor, renamed over it (a crash leaves the old or the new)."""
    try:
        mode: int | None = stat.S_IMODE(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        mode = None
    temporary = f".{name}.koog-{secrets.token_hex(4)}"[:255]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(temporary, flags, 0o666, dir_fd=folder)
    try:
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise


def _problem(exc: OSError) -> str:
    """What a person reads: a link on the path is named as such."""
    if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link (EMLINK: BSD)
        return (
            "a symbolic link (or a file where a folder should be) is on its path, which koog "
            "never follows: it could lead outside the working folder"
        )
    return exc.strerror or str(exc)


def _digests(journal: Path) -> set[str]:
    found: set[str] = set()
    try:
        lines = journal.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            for key in ("before", "after"):
                if isinstance(event.get(key), str):
                    found.add(event[key])
    return found
