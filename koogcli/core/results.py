"""What services hand back to be shown: typed values the CLI, the REPL and ui/ render (or
turn into JSON), so nothing at that seam is untyped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from koogcli.core.found import Found as Found  # where its users name it
from koogcli.core.messages import Message, ToolCall
from koogcli.core.usage import Usage

if TYPE_CHECKING:  # hints only: `history search` and `list` import this module
    from koogcli.core.agent_edits import FileFate
    from koogcli.core.checkpoints import Checkpoint
    from koogcli.core.tool_ports import ToolOutcome

Approval = Literal["y", "n", "a"]  # yes, no, always (this tool, this session)
Status = Literal[
    "undone", "failed", "declined", "left in place", "already undone", "files set back"
]


def call_text(call: ToolCall) -> str:
    from koogcli.core.checkpoints import arguments_text

    return f"{call.name}({arguments_text(call.arguments)})"


@dataclass(frozen=True)
class Compensation:
    """What became of one tool call a rollback took out of the history."""

    call: ToolCall
    outcome: ToolOutcome | None  # None: no compensating tool ran
    status: Status = "undone"
    reason: str = ""  # why it was left in place; for one undone, how (in doubt, ...)

    @property
    def failed(self) -> bool:
        """Its effect remains though it was meant to be undone."""
        return self.status in ("failed", "declined")

    def describe(self) -> str:
        """`undone: create_user(Alex)`, `left in place: create_user(Bob) (why)`."""
        call = call_text(self.call)
        said = " ".join((self.outcome.text if self.outcome else "").split())[:100]
        if self.status == "undone":
            how = f" ({self.reason})" if self.reason else ""
            return f"undone: {call}{how}" + (f": {said}" if said else "")
        if self.status == "failed":
            return f"not undone (its compensation failed): {call}: {said}"
        if self.status == "declined":
            return f"left in place: {call} (the user {self.reason})"
        return f"{self.status}: {call} ({self.reason})"


@dataclass(frozen=True)
class RollbackResult:
    session: str
    restored: Checkpoint | None  # None: a retry that only finished a stopped rollback
    undo_point: str | None
    messages_before: int
    messages_after: int
    compensations: list[Compensation] = field(default_factory=list)
    undoes: str = ""
    note: Message | None = None  # recorded with --force: effects undone since
    finished: list[Compensation] = field(default_factory=list)
    # An agent session's files: set back, left (changed since), not covered.
    files: list[FileFate] = field(default_factory=list)
    files_finished: list[FileFate] = field(default_factory=list)  # a killed rollback's
    # `--latest` after a rollback was stopped once it had restored the history: that
    # rollback is finished, and nothing more is rolled back (it would undo itself).
    retried: bool = False

    @property
    def failed(self) -> list[Compensation]:
        return [c for c in [*self.finished, *self.compensations] if c.failed]


@dataclass(frozen=True)
class CompressResult:
    session: str
    strategy: str
    before: list[Message]
    after: list[Message]
    requests: int
    checkpoint: str | None
    changed: bool
    dry_run: bool
    # What went wrong on the way without stopping it (answers that never became valid).
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class UsageTotals:
    replies: int  # model answers recorded in the transcript
    reported: int  # of them, those the server reported token counts for
    prompt_tokens: int
    completion_tokens: int
    # §5.4a: summed over the replies whose server said how much its prompt cache served
    # (None: none said), and the prompt tokens of those same replies.
    cached: Usage | None = None


@dataclass(frozen=True)
class SharedConversation:
    """A session as `history export --format markdown|html` shows it: its messages with
    the redact preprocessors applied (nothing they hide is written)."""

    session: str
    messages: tuple[Message, ...]
    updated_at: str | None
