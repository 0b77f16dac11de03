"""Where koog keeps things, and the guarantee that no path escapes the data dir (SPEC §4).

Folders koog creates are mode 0700. Paths for a session are built only from a parsed
SessionName and checked to stay inside the data dir. No path koog uses inside the data dir
may pass through a symbolic link: one found where koog expects its own file or folder is an
error naming it, so nothing is ever read, written or deleted outside (the data dir itself
may be a link). Files are also opened with O_NOFOLLOW (adapters/atomic.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from koogcli.core.errors import StorageError
from koogcli.core.names import SessionName


def config_path(flag: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The config file and whether the user named it explicitly (then it must exist)."""
    if flag:
        return Path(flag).expanduser(), True
    if env.get("KOOG_CONFIG"):
        return Path(env["KOOG_CONFIG"]).expanduser(), True
    import platformdirs

    return platformdirs.user_config_path("koog") / "config.toml", False


def data_dir(flag: str | None, env: Mapping[str, str]) -> Path:
    if flag:
        return Path(flag).expanduser()
    if env.get("KOOG_DATA_DIR"):
        return Path(env["KOOG_DATA_DIR"]).expanduser()
    import platformdirs

    return platformdirs.user_data_path("koog")


def symlink_error(path: Path) -> StorageError:
    return StorageError(
        f"{path} is a symbolic link; koog never follows links inside its data dir",
        hint="move the link away; koog keeps its own files there",
    )


def ensure_dir(path: Path) -> Path:
    """Create `path` and missing parents as 0700; leave existing folders' modes alone."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    try:
        for folder in reversed(missing):
            folder.mkdir(mode=0o700, exist_ok=True)
            os.chmod(folder, 0o700)
    except OSError as exc:
        raise StorageError(f"cannot create folder {path}: {exc.strerror}") from exc
    return path


class DataDir:
    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        self._root_text = os.path.normpath(self.root)
        self._prefix = os.path.join(self._root_text, "")

    def _inside(self, *parts: str) -> Path:
        # Strings and os.path, not pathlib: every read and write of a session asks here,
        # several times a request in `koog serve`.
        text = os.path.normpath(os.path.join(self._root_text, *parts))
        if text == self._root_text:
            return self.root
        if not text.startswith(self._prefix):
            raise StorageError(f"refusing a path outside the data dir: {text}")
        probe = self._root_text
        for part in text[len(self._prefix) :].split(os.sep):
            probe = os.path.join(probe, part)
            if os.path.islink(probe):
                raise symlink_error(Path(probe))
        return Path(text)

    def folder(self, name: str) -> Path:
        return ensure_dir(self._inside(name))

    def session_file(self, session: SessionName) -> Path:
        return self._inside("sessions", f"{session.value}.json")

    def lock_file(self, session: SessionName, purpose: str = "history") -> Path:
        suffix = "" if purpose == "history" else f".{purpose}"
        return self._inside("locks", f"{session.value}{suffix}.lock")

    @property
    def sessions_dir(self) -> Path:
        return self._inside("sessions")

    @property
    def memory_file(self) -> Path:
        return self._inside("memory.sqlite3")

    def receipt_file(self, session: SessionName, call_id: str) -> Path:
        """Where a tool call's result is written before it is returned (core/receipts.py)."""
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)[:80]
        return self._inside("receipts", session.value, f"{safe}.json")

    def undo_receipt_file(self, session: SessionName, call_id: str, point: str | None) -> Path:
        """Where a compensation's result is written before it is returned (its process
        outlives koog: adapters/tools/outliving.py); one per call and rollback."""
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{call_id}-{point}")
        return self._inside("undo", session.value, f"{safe[:120]}.json")

    def edit_journal_file(self, session: SessionName) -> Path:
        """The journal of the files a session's agent edited (adapters/files/agent_files.py)."""
        return self._inside("edits", "sessions", f"{session.value}.jsonl")

    def edit_content_file(self, digest: str) -> Path:
        """A file content the edit journals keep, named by its sha256."""
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise StorageError(f"not a content digest: {digest[:80]!r}")
        return self._inside("edits", "contents", digest)

    @property
    def reserve_file(self) -> Path:
        """Room kept for closing a failed turn on a full disk (adapters/files/reserve.py)."""
        return self._inside("koog.reserve")

    @property
    def learned_file(self) -> Path:
        return self._inside("learned.json")

    @property
    def mcp_tools_file(self) -> Path:
        return self._inside("mcp-tools.json")

    @property
    def input_history_file(self) -> Path:
        return self._inside("input_history")
