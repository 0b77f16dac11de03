"""The archive's values (SPEC §4a): a conversation read from another tool's own store, as
koog's messages, with where it came from, the branches the person left, and the lines that
could not be read. Readers (adapters/stores/) make them; services/archive.py stores them.

Imported messages get ids derived from the source's own ids, so a second import of the
same line finds it; `content_key` finds a message again by what it says, for a store that
was rewritten in place or a conversation `koog serve` already keeps.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from koogcli.core.messages import CLIENT_TOOLS, Message, ToolCall

# The tools whose stores koog reads, as `--from` and `--source` name them.
TOOLS = ("claude-code", "codex", "opencode", "llm", "chatgpt", "claude-ai")
# Their names for people.
TITLES = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "opencode": "opencode",
    "llm": "llm",
    "chatgpt": "ChatGPT",
    "claude-ai": "Claude.ai",
}
# The session name prefix of each tool: Claude Code, Codex and opencode as `koog serve`
# names their sessions (config/schema.py SERVE_CLIENT_HEADERS), so one conversation is one
# name however it reached koog.
PREFIXES = {
    "claude-code": "claude-",
    "codex": "codex-",
    "opencode": "opencode-",
    "llm": "llm-",
    "chatgpt": "chatgpt-",
    "claude-ai": "claude-ai-",
}
# meta key of an imported message: what the source keeps beside it that is never shown,
# sent or indexed (thinking with its signature, encrypted reasoning), as the source wrote it.
NATIVE = "source_native"
IMPORTED = "imported"


@dataclass(frozen=True)
class Skipped:
    """A line (or row) that could not be read: where, and why, in words (never its text)."""

    where: str
    why: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", path_text(self.where))


def path_text(path: object) -> str:
    """A file name as text that can be stored and shown: bytes that are not UTF-8 (which
    Python carries as lone surrogates) become U+FFFD."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@dataclass(frozen=True)
class Branch:
    """A branch the person left: the messages it shares with the visible one, then its own."""

    shared: int
    messages: list[Message]
    label: str  # the source's id of its last message


@dataclass
class Conversation:
    tool: str
    source_id: str
    file: str
    cwd: str | None = None
    model: str | None = None
    started_at: str | None = None
    updated_at: str | None = None
    messages: list[Message] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)
    name: str | None = None  # its session's name, where not the tool's prefix and its id

    def __post_init__(self) -> None:
        self.source_id = path_text(self.source_id)  # from a file name, for some tools
        self.file = path_text(self.file)
        self.cwd = None if self.cwd is None else path_text(self.cwd)

    @property
    def session(self) -> str:
        return self.name or session_name(self.tool, self.source_id)


@dataclass
class Report:
    """What one pass did (or, with `dry_run`, would do)."""

    files: int = 0  # read
    unchanged: int = 0  # skipped by size and mtime
    bytes: int = 0
    new_sessions: list[str] = field(default_factory=list)
    grown: list[str] = field(default_factory=list)
    messages: int = 0
    forks: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # tools with no store here

    @property
    def changed(self) -> bool:
        return bool(self.new_sessions or self.grown or self.forks)


def session_name(tool: str, source_id: str) -> str:
    """`claude-<uuid>`, ... : the tool's prefix and its id, made safe as a session name (an
    id with other characters, or too long, keeps a digest of itself)."""
    prefix = PREFIXES[tool]
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", source_id).strip(".-") or "x"
    if safe != source_id or len(prefix) + len(safe) > 60:
        safe = safe[: 60 - len(prefix) - 9] + "-" + digest(source_id)[:8]
    return prefix + safe


def digest(*parts: str) -> str:
    import hashlib  # not at import: `history show` imports this module

    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def message_id(tool: str, source_id: str, native: str) -> str:
    """The id of an imported message: the same line always gets the same id."""
    return digest(tool, source_id, native)[:32]


def imported(m: Message, native: dict[str, object] | None = None) -> Message:
    """`m`, just made by a reader and held by nobody else, marked imported in place (a
    copy per message is a tenth of an import's time); a tool call is the agent's own,
    which koog never runs or undoes."""
    meta = m.meta
    meta[IMPORTED] = True
    if m.tool_calls:
        meta[CLIENT_TOOLS] = True
    if native:
        meta[NATIVE] = native
    return m


def joined(
    m: Message, text: str, calls: Sequence[ToolCall], key: str, native: Sequence[object]
) -> Message:
    """An imported reply with more of it: its text, calls and what the source keeps
    beside it (under `key`: "thinking", "reasoning") after what it had (a source that
    writes one reply in parts: Claude Code's blocks, Codex's items)."""
    kept = m.meta.get(NATIVE)
    earlier = kept.get(key, []) if isinstance(kept, dict) else []
    whole = [*earlier, *native]
    more = Message(
        "assistant",
        (m.text + text) or None,
        id=m.id,
        created_at=m.created_at,
        tool_calls=(*m.tool_calls, *calls),
    )
    return imported(more, {key: whole} if whole else None)


def shown(messages: Sequence[Message]) -> list[Message]:
    """The messages as people (and `history show --json`) see them: without what the
    source keeps beside a reply (thinking signatures, encrypted reasoning)."""
    return [
        replace(m, meta={k: v for k, v in m.meta.items() if k != NATIVE}) if NATIVE in m.meta else m
        for m in messages
    ]


_INJECTED = re.compile(
    r"<(system-reminder|environment_context|user_instructions|command-name|command-message|"
    r"command-args|local-command-stdout)>.*?</\1>",
    re.S,
)


def prompt_text(text: str) -> str:
    """What the person typed, without the context an agent wraps around it."""
    return _INJECTED.sub("", text).strip()


def injected(text: str) -> list[str]:
    """The context an agent wrapped around what the person typed, block by block."""
    return [found.group(0) for found in _INJECTED.finditer(text)]


def content_key(m: Message) -> tuple[str, ...]:
    """What a message says, for finding it again without its id: its role and text (a
    prompt without what the agent injected), its calls by id and name, a result by its
    call."""
    if m.role == "tool":
        return ("tool", m.tool_call_id or "", " ".join(m.text.split())[:2000])
    calls = tuple(f"{c.id}:{c.name}" for c in m.tool_calls)
    text = prompt_text(m.text) if m.role == "user" else m.text
    return (m.role, " ".join(text.split())[:2000], *calls)


def left_branch(stored: Sequence[Message], incoming: Sequence[Message]) -> list[Message]:
    """The stored messages without the imported ones the conversation no longer holds,
    by id or by what they say (it went on along another branch): what stays in the
    session, in order; all of them when nothing was left."""
    ids = {m.id for m in incoming}
    said = {content_key(m) for m in incoming}
    return [m for m in stored if not m.meta.get(IMPORTED) or m.id in ids or content_key(m) in said]


def new_messages(stored: Sequence[Message], incoming: Sequence[Message]) -> list[Message]:
    """The incoming messages the session does not hold yet, in order: not by id, and not by
    what they say (each stored message not found by id stands for one incoming one)."""
    if not stored:
        return list(incoming)
    ids = {m.id for m in incoming}
    held = {m.id for m in stored}
    said = Counter(content_key(m) for m in stored if m.id not in ids)
    fresh = []
    for m in incoming:
        if m.id in held:
            continue
        key = content_key(m)
        if said[key] > 0:
            said[key] -= 1
            continue
        fresh.append(m)
    return fresh


def utc(stamp: object) -> str | None:
    """An ISO-8601 time from a store as koog writes times (UTC, milliseconds, `Z`), so
    times of every source sort together; None when it is none."""
    if not isinstance(stamp, str) or not stamp:
        return None
    if len(stamp) == 24 and stamp[10] == "T" and stamp[-1] == "Z" and stamp[19] == ".":
        return stamp  # already so (Claude Code, Codex): no parsing per line
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_epoch(seconds: object) -> str | None:
    """Seconds since 1970 (an export's, opencode's milliseconds / 1000) as koog writes
    times; None when it is none."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_context(text: str) -> bool:
    """A user message that is only what an agent injected (no prompt of the person's)."""
    return bool(text.strip()) and not prompt_text(text)
