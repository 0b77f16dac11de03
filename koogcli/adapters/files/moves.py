"""Renaming and deleting a whole session on the file backend, as one act.

A session is several things on disk (its document and log, transcript, checkpoint folder,
pending ingestion), and no file system moves several things at once. So a rename or a
delete first writes its intent (`intents/NAME.json`: what, from which name, to which),
then moves or removes each part, then removes the intent. Every step can be done again
(a part already moved or gone is skipped), so a process killed at any point leaves an
intent that the next koog command finishes before it reads anything: afterwards the
session is whole under exactly one name, or gone. One lock (`locks/.moves.lock`) keeps
two moves, and a move and its finishing, from running at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.paths import DataDir
from koogcli.core.errors import CorruptDocumentError, KoogError
from koogcli.core.names import SessionName


@dataclass(frozen=True)
class Parts:
    """What each store does with one session's part of it (each safe to repeat)."""

    rename: list[Callable[[SessionName, SessionName], object]]
    delete: list[Callable[[SessionName], object]]


class FileSessionMoves:
    def __init__(self, data: DataDir, parts: Parts, lock_timeout: float = 30.0) -> None:
        self.data = data
        self.parts = parts
        self.lock_timeout = lock_timeout

    def rename(self, old: SessionName, new: SessionName) -> None:
        with self._lock():
            self._run({"op": "rename", "old": old.value, "new": new.value})

    def delete(self, session: SessionName) -> None:
        with self._lock():
            self._run({"op": "delete", "session": session.value})

    def finish(self) -> list[tuple[str, ...]]:
        """Complete what a killed koog's rename or delete left; what was finished:
        ("rename", OLD, NEW) or ("delete", SESSION)."""
        folder = self._folder()
        try:
            waiting = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise atomic.read_failure(folder, exc) from exc
        if not waiting:
            return []
        done = []
        with self._lock():
            for name in waiting:
                path = folder / name
                try:
                    intent = json.loads(atomic.read_bytes(path))
                except FileNotFoundError:
                    continue  # finished by another process meanwhile
                except ValueError:
                    raise CorruptDocumentError(
                        f"{path} is not an intent koog wrote",
                        hint="move it aside; koog never removes what it cannot read",
                    ) from None
                names = self._apply(intent, path)
                atomic.remove(path)
                done.append((intent["op"], *(n.value for n in names)))
        return done

    def _run(self, intent: dict[str, str]) -> None:
        name = intent.get("old") or intent["session"]
        path = self._folder() / f"{intent['op']}.{name}.json"
        atomic.write_text(path, json.dumps(intent))
        self._apply(intent, path)
        atomic.remove(path)

    def _apply(self, intent: object, path: Path) -> list[SessionName]:
        """Do (again) what the intent says; what the stores raise is raised."""
        names = _names(intent, path)
        if len(names) == 2:
            for rename in self.parts.rename:
                rename(names[0], names[1])
        else:
            for delete in self.parts.delete:
                delete(names[0])
        return names

    def _folder(self) -> Path:
        return self.data.root / "intents"

    def _lock(self) -> AbstractContextManager[None]:
        return atomic.file_lock(self.data.root / "locks" / ".moves.lock", self.lock_timeout)


def _names(intent: object, path: Path) -> list[SessionName]:
    """[old, new] for a rename, [session] for a delete."""
    try:
        if isinstance(intent, dict) and intent.get("op") == "rename":
            return [SessionName.parse(intent["old"]), SessionName.parse(intent["new"])]
        if isinstance(intent, dict) and intent.get("op") == "delete":
            return [SessionName.parse(intent["session"])]
    except (KeyError, TypeError, KoogError):
        pass
    raise CorruptDocumentError(
        f"{path} is not an intent koog wrote",
        hint="move it aside; koog never removes what it cannot read",
    )
