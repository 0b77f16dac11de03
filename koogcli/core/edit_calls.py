"""Which files a coding agent's edit call changes, and under which folder (SPEC §6 "The
agents' file edits"): Claude Code `Write` / `Edit` / `MultiEdit` / `NotebookEdit`, Codex
`apply_patch` (also inside a shell command), opencode `write` / `edit` / `apply_patch`.
Pure; the journal of those edits is core/agent_edits.py."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from koogcli.core.messages import ToolCall

# Tool name -> the argument naming the one file it writes.
_ONE_FILE = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
    "write": "filePath",
    "edit": "filePath",
    "multiedit": "filePath",
}
# Tool name -> the argument holding a patch in the `*** Begin Patch` form.
_PATCH = {"apply_patch": ("input", "patch", "patchText"), "patch": ("patchText", "input")}
# A shell call Codex runs as its own apply_patch (`apply_patch <<'EOF' ... EOF`).
_SHELLS = {"shell": "command", "exec_command": "cmd", "local_shell": "command"}
_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$"
)
_FOLDER = (
    re.compile(r"^\s*(?:-\s*)?(?:Primary )?[Ww]orking directory: (/[^\n]*?)\s*$", re.MULTILINE),
    re.compile(r"<cwd>(/[^<\n]*)</cwd>"),
)


def _arguments(call: ToolCall) -> Mapping[str, Any]:
    try:
        parsed = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):  # not JSON, or too deep: no file named
        return {}
    return parsed if isinstance(parsed, dict) else {}


def patch_paths(patch: str) -> list[str]:
    """The files a `*** Begin Patch` patch adds, updates, deletes or moves to."""
    found: list[str] = []
    for line in patch.splitlines():
        matched = _PATCH_FILE.match(line)
        if matched:
            path = matched.group(1) or matched.group(2)
            if path not in found:
                found.append(path)
    return found


def _shell_patch(value: object) -> str | None:
    text = " ".join(value) if isinstance(value, list) else value
    if isinstance(text, str) and "apply_patch" in text and "*** Begin Patch" in text:
        return text
    return None


def edited_paths(call: ToolCall) -> list[str]:
    """The paths an edit tool's call names, as the call names them (relative paths are
    the working folder's); [] for any other call."""
    if call.name in _ONE_FILE:
        value = _arguments(call).get(_ONE_FILE[call.name])
        return [value] if isinstance(value, str) and value else []
    if call.name in _PATCH:
        arguments = _arguments(call)
        for key in _PATCH[call.name]:
            if isinstance(arguments.get(key), str):
                return patch_paths(arguments[key])
        # A freeform tool's input, kept as it came when it is no JSON object.
        return patch_paths(call.arguments) if "*** Begin Patch" in call.arguments else []
    if call.name in _SHELLS:
        text = _shell_patch(_arguments(call).get(_SHELLS[call.name]))
        return patch_paths(text) if text else []
    return []


def base_folder(call: ToolCall, folder: str | None) -> tuple[str | None, str]:
    """The folder a call's relative paths are in: the `workdir` of Codex's shell call,
    else the working folder; with why not when koog cannot tell (a patch run after a
    `cd`, which koog does not follow)."""
    if call.name not in _SHELLS:
        return folder, ""
    arguments = _arguments(call)
    text = _shell_patch(arguments.get(_SHELLS[call.name])) or ""
    if re.search(r"(^|[\s;&|(])cd\s", text.split("apply_patch", 1)[0]):
        return None, "the patch runs after a `cd`, which koog does not follow"
    workdir = arguments.get("workdir")
    if isinstance(workdir, str) and workdir:
        return absolute(workdir, folder), ""
    return folder, ""


def working_folder(texts: Iterable[str]) -> str | None:
    """The folder an agent tells the model it works in: `Primary working directory: /path`
    (Claude Code), `Working directory: /path` (opencode), `<cwd>/path</cwd>` (Codex); the
    first named."""
    for text in texts:
        for pattern in _FOLDER:
            found = pattern.search(text)
            if found:
                return posixpath.normpath(found.group(1))
    return None


def absolute(path: str, folder: str | None) -> str | None:
    """The call's path made absolute against the working folder (None: relative with no
    folder to join it to)."""
    if posixpath.isabs(path):
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(folder, path)) if folder else None


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
