"""The edit journal of agent sessions, in the data dir whatever the storage backend: the
files it is about are on this machine (koog serve reads them as the agent's user does).

- `edits/sessions/NAME.jsonl`: the session's events (core/agent_edits.py), one JSON line
  each, appended and synced; a torn last line is skipped.
- `edits/contents/SHA256`: each content once, 0600; a session's forget removes the
  contents no other journal names.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
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

    def inside(self, path: str, folder: str) -> bool:
        """Whether the file's folder, as it is now (links resolved, up to the nearest one
        that exists), is under `folder`: a link put in place of a folder since the edit
        must not lead a restore elsewhere."""
        try:
            parent = os.path.dirname(path)
            while parent and not os.path.lexists(parent):
                parent = os.path.dirname(parent)
            real, root = os.path.realpath(parent), os.path.realpath(folder)
        except (ValueError, OSError):
            return False
        return real == root or real.startswith(root.rstrip("/") + "/")

    def look(self, path: str, limit: int) -> FileLook:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return FileLook(False)
        except OSError as exc:
            return FileLook(True, problem=exc.strerror or str(exc))
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
            return FileLook(True, problem=exc.strerror or str(exc))
        finally:
            os.close(fd)
        if len(content) > limit:  # it grew while read
            return FileLook(True, size=len(content))
        return FileLook(True, hashlib.sha256(content).hexdigest(), len(content), content)

    def put(self, path: str, content: bytes | None) -> None:
        target = Path(path)
        if content is None:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(os.lstat(target).st_mode)
        except FileNotFoundError:
            mode = None
        temporary = target.parent / f".{target.name}.koog-{secrets.token_hex(4)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            temporary.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(temporary, target)


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
