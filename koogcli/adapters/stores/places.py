"""Where each tool keeps its store by default (honouring the variables each tool reads),
and its reader: the archive service asks here, never a reader directly."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from koogcli.adapters.stores import claude_code, codex, exports, llm_logs, opencode
from koogcli.core.archive import Conversation, Skipped

Reader = Callable[[Path, list[Skipped]], Iterable[Conversation]]


@dataclass(frozen=True)
class Source:
    tool: str
    files: Callable[[Path], Iterator[Path]]
    read: Reader
    place: str  # where it is read from by default, as people write it ("" for exports)

    def default(self) -> Path | None:
        return _default(self.tool)


def _one(read: Callable[[Path, list[Skipped]], Conversation | None]) -> Reader:
    def each(path: Path, skipped: list[Skipped]) -> Iterator[Conversation]:
        found = read(path, skipped)
        if found is not None:
            yield found

    return each


SOURCES = {
    "claude-code": Source(
        "claude-code",
        claude_code.files,
        _one(claude_code.read),
        "$CLAUDE_CONFIG_DIR or ~/.claude: projects/*/*.jsonl",
    ),
    "codex": Source(
        "codex",
        codex.files,
        _one(codex.read),
        "$CODEX_HOME or ~/.codex: sessions/, archived_sessions/",
    ),
    "opencode": Source(
        "opencode",
        opencode.files,
        opencode.read,
        "$XDG_DATA_HOME/opencode or ~/.local/share/opencode: opencode.db, storage/",
    ),
    "llm": Source(
        "llm",
        llm_logs.files,
        llm_logs.read,
        "$LLM_USER_PATH or ~/.config/io.datasette.llm: logs.db",
    ),
    "chatgpt": Source("chatgpt", exports.files, exports.chatgpt, ""),
    "claude-ai": Source("claude-ai", exports.files, exports.claude_ai, ""),
}


def _default(tool: str) -> Path | None:
    home = Path.home()
    env = os.environ
    if tool == "claude-code":
        return Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    if tool == "codex":
        return Path(env.get("CODEX_HOME") or home / ".codex")
    if tool == "opencode":
        return Path(env.get("XDG_DATA_HOME") or home / ".local" / "share") / "opencode"
    if tool == "llm":
        return Path(env.get("LLM_USER_PATH") or home / ".config" / "io.datasette.llm")
    return None  # an export has no place of its own: its file is named
