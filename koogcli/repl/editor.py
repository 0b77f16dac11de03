"""Writing a message in the user's editor ($VISUAL, then $EDITOR)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from koogcli.core.errors import UsageError

FALLBACKS = ("editor", "nano", "vi")


def editor_command() -> list[str]:
    for variable in ("VISUAL", "EDITOR"):
        if command := os.environ.get(variable, "").strip():
            return shlex.split(command)
    for name in FALLBACKS:
        if found := shutil.which(name):
            return [found]
    raise UsageError("no editor found", hint="set $EDITOR (for example: export EDITOR=nano)")


def edit_text(initial: str) -> str | None:
    """The text as the editor left it; None when the editor failed or left it empty.
    The file is private to the user and removed afterwards."""
    command = editor_command()
    folder = Path(tempfile.mkdtemp(prefix="koog-edit-"))
    path = folder / "message.md"
    try:
        path.write_text(initial, encoding="utf-8")
        try:
            status = subprocess.call([*command, str(path)])
        except OSError as exc:
            raise UsageError(
                f"cannot run the editor {command[0]!r}: {exc.strerror}",
                hint="set $EDITOR to an editor that is installed",
            ) from exc
        if status != 0:
            return None
        text = path.read_text(encoding="utf-8", errors="replace").strip("\n")
        return text if text.strip() else None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
