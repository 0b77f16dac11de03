"""AppContext: a record of what the composition root built (services/compose.py).

Everything a service needs (settings, data dir, stores, tools, the model) hangs off one
object, so tests build it with fakes instead of patching modules. Each part is built on
first use by `parts`, which compose fills with the concrete adapters; this module imports
none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from koogcli.core.names import SessionName
from koogcli.core.ports import (
    CheckpointStore,
    DataPaths,
    Embedder,
    HistoryStore,
    LearnedFacts,
    MemoryStore,
    PendingIngestion,
    StorageBackend,
    StoreReader,
    TranscriptStore,
)

if TYPE_CHECKING:
    from koogcli.config.loader import LoadedConfig
    from koogcli.config.schema import Settings
    from koogcli.core.agent_edits import AgentFiles
    from koogcli.core.chat_memory import ChatMemory
    from koogcli.core.model_port import ChatModel
    from koogcli.core.preprocessors import Pipeline
    from koogcli.core.tool_ports import ToolBox

ModelFactory = Callable[["AppContext"], "ChatModel"]
EmbedderFactory = Callable[["AppContext"], Embedder]


@dataclass(frozen=True)
class Parts:
    """How each part is built on first use (services/compose.py chooses the adapters)."""

    storage: Callable[[AppContext], StorageBackend]
    toolbox: Callable[[AppContext], ToolBox]
    pipeline: Callable[[AppContext], Pipeline]
    learned: Callable[[AppContext], LearnedFacts]
    reserve: Callable[[AppContext, bool], bool]  # keep (False) or spend (True)
    endpoint: Callable[[AppContext], tuple[AppContext, str | None]]
    agent_files: Callable[[AppContext], AgentFiles]
    stores: Callable[[], Mapping[str, StoreReader]]  # other tools' stores, by tool


LOCAL_MAX_TOKENS = 4096  # a local server's reply cap when none is configured


@dataclass
class AppContext:
    """`config` is loaded on first use: commands that need no settings (`history show -s`)
    skip building the schema, which keeps them fast in pipelines."""

    load_config: Callable[[], LoadedConfig]
    data: DataPaths
    env: Mapping[str, str]
    parts: Parts
    model_factory: ModelFactory
    embedder_factory: EmbedderFactory
    config_file: Path | None = None
    _model: ChatModel | None = field(default=None, repr=False)
    _embedder: Embedder | None = field(default=None, repr=False)
    # (session, tool) pairs the user answered "always" for (tool approval).
    approved_tools: set[tuple[str, str]] = field(default_factory=set)
    # `koog chat --yes`: every call that would ask runs, as if approved.
    approve_all: bool = False
    # Where a service says something went other than asked, without failing.
    warn: Callable[[str], None] = field(default=lambda text: None)
    # Renames and deletes a stopped koog left halfway, finished when storage was opened.
    finished_moves: list[tuple[str, ...]] = field(default_factory=list)

    @cached_property
    def config(self) -> LoadedConfig:
        return self.load_config()

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @cached_property
    def pipeline(self) -> Pipeline:
        return self.parts.pipeline(self)

    @cached_property
    def toolbox(self) -> ToolBox:
        """Tools from config, imported at start-up so a bad entry fails before any turn."""
        return self.parts.toolbox(self)

    @cached_property
    def storage(self) -> StorageBackend:
        """Files under the data dir, or PostgreSQL when `storage.url` is set."""
        return self.parts.storage(self)

    def moves_finished(self) -> list[tuple[str, ...]]:
        """Renames and deletes a stopped koog left halfway, finished on opening storage."""
        _ = self.storage
        return self.finished_moves

    @property
    def history(self) -> HistoryStore:
        return self.storage.history

    @property
    def transcript(self) -> TranscriptStore:
        return self.storage.transcript

    @property
    def checkpoints(self) -> CheckpointStore:
        return self.storage.checkpoints

    @property
    def pending_ingestion(self) -> PendingIngestion:
        return self.storage.pending()

    def turn_lock(
        self, session: SessionName, exclusive: bool = False
    ) -> AbstractContextManager[None]:
        """Held shared by every running turn; exclusive by a resume (never beside a live turn)."""
        return self.storage.turn_lock(session, exclusive)

    def undo_lock(self, session: SessionName, wait: bool = True) -> AbstractContextManager[None]:
        """Held while a session's compensations are journalled and run (one process at a
        time); without `wait`, LockTimeoutError at once when another holds it."""
        return self.storage.undo_lock(session, wait)

    def turn_owner(self) -> dict[str, object]:
        """This process, as recorded in a turn's step checkpoints."""
        return self.storage.turn_owner()

    def owner_alive(self, owner: object) -> bool:
        return self.storage.owner_alive(owner if isinstance(owner, dict) else None)

    def keep_reserve(self) -> None:
        """Room on the data dir's disk for closing a failed turn."""
        self.parts.reserve(self, False)

    def spend_reserve(self) -> bool:
        return self.parts.reserve(self, True)

    @cached_property
    def long_term_memory(self) -> MemoryStore:
        return self.storage.memory(self.warn)

    @cached_property
    def agent_files(self) -> AgentFiles:
        """The journal of the files agents' edit tools changed (services/agent_files.py)."""
        return self.parts.agent_files(self)

    @cached_property
    def learned_limits(self) -> LearnedFacts:
        """Context sizes servers named when they refused a request."""
        return self.parts.learned(self)

    @property
    def endpoint_key(self) -> str:
        """Which server the model is asked at, as learned limits are kept for it."""
        return self.settings.llm.base_url or "https://api.openai.com/v1"

    def embedder(self) -> Embedder:
        """Embeddings; only asked for when `[long_term_memory.embeddings] model` is set."""
        if self._embedder is None:
            self._embedder = self.embedder_factory(self)
        return self._embedder

    @property
    def chat_memory(self) -> ChatMemory:
        from koogcli.core.chat_memory import ChatMemory

        return ChatMemory(self.history, self.pipeline)

    def with_settings(self, settings: Settings, keep_model: bool = True) -> AppContext:
        """A new context with other settings over the same storage, tools and
        preprocessors (and model, unless `keep_model` is False); this one is unchanged."""
        from dataclasses import replace

        config = replace(self.config, settings=settings)
        derived = replace(
            self, load_config=lambda: config, _model=self._model if keep_model else None
        )
        shared_parts = ("storage", "pipeline", "toolbox", "long_term_memory", "learned_limits")
        for shared in (*shared_parts, "agent_files"):
            if shared in self.__dict__:
                derived.__dict__[shared] = self.__dict__[shared]
        return derived

    def with_memory(self, **sections: Mapping[str, object]) -> AppContext:
        """A new context whose `[long_term_memory]` sections (retrieval, ingestion,
        embeddings) have these fields changed."""
        memory = self.settings.long_term_memory
        changed = {
            name: getattr(memory, name).model_copy(update=dict(fields))
            for name, fields in sections.items()
        }
        update = {"long_term_memory": memory.model_copy(update=changed)}
        return self.with_settings(self.settings.model_copy(update=update))

    def with_endpoint(self) -> tuple[AppContext, str | None]:
        """The context a command talks to the model through, and a line to show when a
        local server's model is used; the first-run guide (exit 2) when no endpoint is
        configured at all and no local server answers (services/compose.py)."""
        return self.parts.endpoint(self)

    def with_local(self, url: str | None, first_model: str | None) -> AppContext:
        """Settings for a local server: its URL (when found) and, unless configured, its
        first model and a reply cap of LOCAL_MAX_TOKENS (a small model left to run on can
        stream for minutes, then overflow its context)."""
        llm = self.settings.llm
        update: dict[str, object] = {} if url is None else {"base_url": url}
        if first_model is not None and "llm.model" not in self.config.provenance:
            update["model"] = first_model
        if llm.max_tokens is None and "llm.max_tokens" not in self.config.provenance:
            update["max_tokens"] = LOCAL_MAX_TOKENS
        settings = self.settings.model_copy(update={"llm": llm.model_copy(update=update)})
        return self.with_settings(settings, keep_model=False)

    def model(self) -> ChatModel:
        if self._model is None:
            self._model = self.model_factory(self)
        return self._model

    def require_session(self, session: SessionName) -> None:
        """Commands that act on an existing session refuse a name that is none (exit 2),
        creating nothing."""
        if not self.history.exists(session) and not self.transcript.exists(session):
            from koogcli.core.errors import SessionNotFoundError

            raise SessionNotFoundError(
                f"no session named {session.value!r}",
                hint="`koog history list` shows the sessions",
            )

    def session(self, raw: str | None) -> SessionName:
        """The session a command acts on: named, else `chat.default_session`, else the most
        recently used one."""
        if raw is not None:
            return SessionName.parse(raw)
        if self.settings.chat.default_session:
            return SessionName.parse(self.settings.chat.default_session)
        return self.latest_session()

    def latest_session(self) -> SessionName:
        from koogcli.core.errors import SessionNotFoundError

        used = [s for s in self.history.sessions() if s.updated_at and not s.problem]
        if not used:
            raise SessionNotFoundError(
                "no session yet", hint="start one with `koog chat`, or name one with -s NAME"
            )
        return SessionName(max(used, key=lambda s: s.updated_at or "").name)
