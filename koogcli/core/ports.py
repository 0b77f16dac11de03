"""Protocols the services depend on; adapters implement them, tests swap in fakes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from koogcli.core.messages import Message
from koogcli.core.usage import Usage as Usage  # where ports and their users name it

if TYPE_CHECKING:
    from koogcli.core.archive import Conversation, Skipped
    from koogcli.core.checkpoints import Checkpoint, CompensationEntry
    from koogcli.core.memory import MemoryQuery, MemoryRecord, Namespaces, SearchHit
    from koogcli.core.names import SessionName


@dataclass(frozen=True, slots=True)
class StoredHistory:
    messages: list[Message]
    revision: int  # 0: nothing stored yet
    updated_at: str | None = None


@dataclass(frozen=True, slots=True)
class SessionSource:
    """Where an imported session came from (SPEC §4a)."""

    tool: str
    source_id: str
    file: str
    cwd: str | None
    model: str | None
    started_at: str | None
    updated_at: str | None
    imported_at: str | None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    name: str
    messages: int
    revision: int
    updated_at: str | None
    problem: str | None = None  # set when the session's document cannot be read
    preview: str = ""  # the first user message
    forked_from: tuple[str, int] | None = None  # (session, messages taken) for a fork
    source: SessionSource | None = None  # where an imported session came from


# Told (total, the messages just before a cut, those just after), may refuse the cut.
CutCheck = Callable[[int, Sequence[Message], Sequence[Message]], None]


class HistoryStore(Protocol):
    """Koog's ChatHistoryProvider: one way to read a history (`read`), one to write it
    (`write`, with a revision for lost-update safety)."""

    def read(self, session: SessionName) -> StoredHistory: ...

    def tail(self, session: SessionName, count: int) -> list[Message]:
        """The last `count` messages; a store may read them without the rest."""
        ...

    def write(
        self, session: SessionName, messages: Sequence[Message], expected_revision: int | None
    ) -> int:
        """Store and return the new revision; ConflictError if the revision moved."""
        ...

    def exists(self, session: SessionName) -> bool: ...

    def splice(self, source: SessionName, target: SessionName, count: int, check: CutCheck) -> bool:
        """Store `target` (new) as the first `count` messages of `source` without reading
        all of it; `check(total, before_cut, after_cut)` may refuse first. False: this
        store has no cheaper way, the caller reads and writes."""
        ...

    def put(
        self, session: SessionName, messages: Sequence[Message], revision: int, updated_at: str
    ) -> None:
        """Store exactly this history, revision and time (`storage copy`: both ends alike)."""
        ...

    def sessions(self) -> list[SessionInfo]: ...

    def names(self) -> list[str]:
        """Session names only (no document read)."""
        ...

    def delete(self, session: SessionName) -> bool: ...


# The transcript keeps what a failed turn produced, its turn id marked so (`failed:ID`):
# turns are numbered without it (SPEC §5.19: a session of four answered turns has four).
FAILED_TURN = "failed:"


class TranscriptStore(Protocol):
    def append(self, session: SessionName, messages: Sequence[Message], turn_id: str) -> None: ...

    def append_turns(
        self, session: SessionName, turns: Sequence[tuple[str, Sequence[Message]]]
    ) -> None:
        """Several turns at once (an import)."""
        ...

    def holding(self, session: SessionName, ids: Sequence[str]) -> set[str]:
        """Which of these message ids the session's transcript holds."""
        ...

    def mark_failed(self, session: SessionName, turn_id: str) -> None:
        """The turn failed: its rows stay, under `FAILED_TURN + turn_id`."""
        ...

    def read(self, session: SessionName) -> list[Message]: ...

    def entries(self, session: SessionName) -> list[tuple[Message, str]]:
        """Each message with the id of the turn that produced it."""
        ...

    def sessions(self) -> list[str]: ...

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        """Which of `candidates` the session's transcript already holds as a tool-call id
        (§5.15). May name more than it holds (a quoted string in a message's text), never
        fewer: a wrong "used" only costs a new id."""
        ...

    def unreadable(self, session: SessionName) -> list[int]:
        """Line numbers the last `read` of the session skipped (torn or garbled)."""
        ...

    def exists(self, session: SessionName) -> bool: ...

    def search(
        self, words: str, session: SessionName | None, limit: int, source: str | None = None
    ) -> list[TranscriptHit]:
        """`source`: only sessions imported from that tool (`koog`: none imported)."""
        ...

    def turn_numbers(self, session: str, positions: Sequence[int]) -> list[int]:
        """Which turn of its session each transcript row at `positions` belongs to (1: the
        first turn that wrote to the transcript and did not fail)."""
        ...


@dataclass(frozen=True, slots=True)
class TranscriptHit:
    session: str
    turn_id: str
    position: int  # the row's place in the whole transcript: a later hit is a larger one
    message: Message


class CheckpointStore(Protocol):
    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        """Persist with the next per-session seq (the given one is ignored); return it."""
        ...

    def headers(self, session: SessionName) -> list[Checkpoint]:
        """Every checkpoint, oldest first, without messages (`message_count` is set)."""
        ...

    def put(self, checkpoint: Checkpoint) -> None:
        """Store it with its own seq and id (`storage copy`); nothing if the id is there."""
        ...

    def get(self, session: SessionName, checkpoint_id: str) -> Checkpoint:
        """One checkpoint with its messages; StorageError if unreadable."""
        ...

    def delete(self, session: SessionName, checkpoint_id: str) -> bool: ...

    def sessions(self) -> list[str]: ...

    def prune(self, session: SessionName, keep_last: int) -> int: ...

    def prune_steps(self, session: SessionName, before: str, batch: int = 1000) -> int:
        """Remove step checkpoints and tombstones created before `before` (ISO time), oldest
        first, and the messages nothing refers to any more, in batches; how many checkpoints."""
        ...

    def compensations(self, session: SessionName) -> list[CompensationEntry]:
        """The journal of compensations rollbacks planned, oldest first."""
        ...

    def used_ids(self, session: SessionName, candidates: Sequence[str]) -> set[str]:
        """Which of `candidates` a checkpoint's messages or the journal hold as a tool-call
        id (§5.15); like TranscriptStore.used_ids, it may name more, never fewer."""
        ...

    def record_compensations(
        self, session: SessionName, entries: Sequence[CompensationEntry], durable: bool = True
    ) -> None:
        """Add or update journal entries (keyed by call id and rollback point); visible to
        every process on return, synced to disk unless `durable` is False."""
        ...


class PendingIngestion(Protocol):
    """Messages of stored turns whose ingestion failed, kept until it succeeds (§5.12)."""

    def load(self, session: SessionName) -> list[Message]: ...

    def save(self, session: SessionName, messages: Sequence[Message]) -> None: ...

    def clear(self, session: SessionName) -> None: ...


class Embedder(Protocol):
    def embed(self, texts: list[str]) -> list[list[float]]: ...


class MemoryStore(Protocol):
    """Long-term memory records by namespace (SPEC §1, KOOG_SEMANTICS §4)."""

    def add(
        self,
        records: Sequence[MemoryRecord],
        vectors: Sequence[Sequence[float]] | None = None,
        model: str = "",
    ) -> list[str]: ...

    def put_vectors(self, model: str, pairs: Sequence[tuple[str, Sequence[float]]]) -> None: ...

    def delete(self, record_id: str) -> bool: ...

    def forget(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Delete records from the store and every index for good and remember their
        sources, so ingestion never adds them again; the records forgotten."""
        ...

    def known_sources(self, namespace: str, sources: Sequence[str]) -> set[str]: ...

    def records(
        self, namespace: Namespaces = None, where: Mapping[str, str] | None = None
    ) -> list[MemoryRecord]: ...

    def size(self, namespace: str) -> int: ...

    def search(self, query: MemoryQuery) -> list[SearchHit]: ...

    def without_vectors(self, namespace: str, model: str) -> list[MemoryRecord]: ...

    def vectors_supported(self) -> bool:
        """Whether vector search works here; when not, the store says so (once)."""
        ...

    def vector_count(self, model: str) -> int: ...

    def vectors(self) -> list[tuple[str, str, list[float]]]:
        """Every stored vector as (record id, model, vector), in insertion order."""
        ...

    def vector_dimension(self, model: str) -> int | None: ...

    def namespaces(self) -> list[str]: ...

    def ids_starting(self, prefix: str, limit: int = 10) -> list[str]: ...

    def get(self, record_id: str) -> MemoryRecord | None: ...

    def get_many(self, record_ids: Sequence[str]) -> dict[str, MemoryRecord]: ...

    def placements(self, namespace: str, digests: Sequence[str]) -> dict[str, list[object]]:
        """The records placed after messages, by the messages' digests (those known)."""
        ...

    def place(self, namespace: str, digest: str, entries: Sequence[Mapping[str, object]]) -> None:
        """Remember the records placed after a message (the first placement stays)."""
        ...


class SessionOrigins(Protocol):
    """Where forked sessions came from (`history fork`)."""

    def record(self, session: SessionName, source: SessionName, at: int) -> None: ...

    def all(self) -> dict[str, tuple[str, int]]:
        """session → (the session it forked from, how many messages it took)."""
        ...


@dataclass(frozen=True, slots=True)
class FileRead:
    """What was read of one source file: its size and mtime then, and the reader's state
    (for a store of many conversations: each one's message count and last id)."""

    size: int
    mtime_ns: int
    state: Mapping[str, object]


class ArchiveStore(Protocol):
    """The archive's bookkeeping: sessions' sources, and files read per machine."""

    def record(self, found: Sequence[tuple[SessionName, Conversation]]) -> None: ...

    def sources(self) -> dict[str, SessionSource]: ...

    def source(self, session: SessionName) -> SessionSource | None: ...

    def files(self, machine: str) -> dict[str, FileRead]: ...

    def read(self, machine: str, files: Mapping[str, FileRead]) -> None: ...


class StoreReader(Protocol):
    """One tool's own store (adapters/stores/places.py): where it is by default, its files
    under a folder, and the conversations in one of them."""

    @property
    def tool(self) -> str: ...

    @property
    def place(self) -> str: ...

    def default(self) -> Path | None: ...

    def files(self, root: Path) -> Iterator[Path]: ...

    def read(self, path: Path, skipped: list[Skipped]) -> Iterable[Conversation]: ...


class TranscriptAppender(Protocol):
    """Appends turns to the transcript from elsewhere; `sync` returns when all sent are
    written (StorageError if they could not be); `finish` ends it."""

    def append_turns(
        self, session: SessionName, turns: Sequence[tuple[str, Sequence[Message]]]
    ) -> None: ...

    def sync(self) -> None: ...

    def finish(self) -> None: ...


class StorageBackend(Protocol):
    """One backend's stores, and how it coordinates turns and whole-session changes across
    processes (SPEC §4): files under the data dir, or PostgreSQL. The composition root
    (services/compose.py) only chooses one."""

    @property
    def history(self) -> HistoryStore: ...

    @property
    def transcript(self) -> TranscriptStore: ...

    @property
    def checkpoints(self) -> CheckpointStore: ...

    @property
    def origins(self) -> SessionOrigins: ...

    @property
    def archive(self) -> ArchiveStore: ...

    def pending(self) -> PendingIngestion: ...

    def background_transcript(self) -> TranscriptAppender | None:
        """A writer for a long import's transcript in a process of its own, or None."""
        ...

    def memory(self, warn: Callable[[str], None]) -> MemoryStore: ...

    def turn_lock(self, session: SessionName, exclusive: bool) -> AbstractContextManager[None]:
        """Shared while a turn runs, exclusive for a resume, a rename or a delete."""
        ...

    def undo_lock(self, session: SessionName, wait: bool) -> AbstractContextManager[None]:
        """Held by a rollback while it journals and runs its compensations, and by whoever
        finishes a killed one: one process at a time runs a session's compensations.
        Without `wait`, LockTimeoutError at once when another holds it."""
        ...

    def turn_owner(self) -> dict[str, object]: ...

    def owner_alive(self, owner: Mapping[str, object] | None) -> bool: ...

    def describe(self) -> dict[str, object]: ...

    def close(self) -> None:
        """Close this process's connections (before a fork: each process opens its own)."""
        ...

    def prepare(self) -> None:
        """Create or upgrade the store now: a server's workers then share one that is
        ready instead of racing to create it."""
        ...

    def migrate(self) -> list[int]: ...

    def rename_session(self, old: SessionName, new: SessionName) -> None:
        """Everything of `old` becomes `new` as one act (killed halfway: finished later)."""
        ...

    def drop_session(self, session: SessionName) -> None: ...

    def finish_moves(self) -> list[tuple[str, ...]]:
        """Complete renames and deletes a killed process left; what was finished:
        ("rename", OLD, NEW) or ("delete", SESSION)."""
        ...


class DataPaths(Protocol):
    """The data dir's paths that services name (adapters/paths.py: DataDir)."""

    @property
    def root(self) -> Path: ...

    def receipt_file(self, session: SessionName, call_id: str) -> Path:
        """Where a tool call's result is written before it is returned (core/receipts.py)."""
        ...

    def undo_receipt_file(self, session: SessionName, call_id: str, point: str | None) -> Path:
        """Where a compensation's result is written before it is returned."""
        ...

    @property
    def input_history_file(self) -> Path: ...


class LearnedFacts(Protocol):
    """What servers taught koog, per endpoint and model (adapters/model/learned_limits.py)."""

    def get(self, endpoint: str, model: str) -> int | None:
        """The context size a server named when it refused a request."""
        ...

    def put(self, endpoint: str, model: str, limit: int) -> None: ...

    def summaries_cut(self, endpoint: str, model: str) -> int | None:
        """When (epoch seconds) a summary of this model was last cut at its limit."""
        ...

    def note_summary_cut(self, endpoint: str, model: str, when: int) -> None: ...

    def told(self, endpoint: str, model: str) -> bool:
        """Whether the user was told this endpoint's model was chosen for them."""
        ...

    def note_told(self, endpoint: str, model: str, when: int) -> None: ...
