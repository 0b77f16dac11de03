"""AppContext: the composition root, the only place concrete adapters are chosen.

Everything a service needs (settings, data dir, stores, a model factory, the environment)
hangs off one object, so tests build it with fakes instead of patching modules.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from koogcli.adapters import paths
from koogcli.core import callables
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import (
    ChatModel,
    CheckpointStore,
    Embedder,
    HistoryStore,
    MemoryStore,
    PendingIngestion,
    StorageBackend,
    ToolBox,
    TranscriptStore,
)

if TYPE_CHECKING:
    from koogcli.adapters.model.learned_limits import LearnedLimits
    from koogcli.adapters.model.openai_model import OpenAIChatModel
    from koogcli.adapters.tools.bounded_regex import BoundedPattern
    from koogcli.config.loader import LoadedConfig
    from koogcli.config.schema import PreprocessorSpec, Settings
    from koogcli.core.chat_memory import ChatMemory
    from koogcli.core.preprocessors import Pipeline

ModelFactory = Callable[["AppContext"], ChatModel]
EmbedderFactory = Callable[["AppContext"], Embedder]


def openai_model_factory(ctx: AppContext) -> ChatModel:
    return _openai_chat(ctx)


def _openai_chat(ctx: AppContext) -> OpenAIChatModel:
    from koogcli.adapters.model.openai_model import (
        OpenAIChatModel,
        RequestOptions,
        resolve_endpoint,
    )

    llm = ctx.settings.llm
    endpoint = resolve_endpoint(
        llm.base_url, llm.api_key_env, ctx.env, llm.timeout_seconds, llm.max_retries
    )
    return OpenAIChatModel(
        endpoint, RequestOptions(llm.max_tokens, llm.reasoning_effort, dict(llm.extra_body))
    )


def openai_embedder_factory(ctx: AppContext) -> Embedder:
    from koogcli.adapters.model.openai_model import OpenAIEmbedder

    return OpenAIEmbedder(_openai_chat(ctx), ctx.settings.long_term_memory.embeddings.model)


@dataclass
class AppContext:
    """`config` is loaded on first use: commands that need no settings (`history show -s`)
    skip building the schema, which keeps them fast in pipelines."""

    load_config: Callable[[], LoadedConfig]
    data: paths.DataDir
    env: Mapping[str, str]
    config_file: Path | None = None
    model_factory: ModelFactory = openai_model_factory
    embedder_factory: EmbedderFactory = openai_embedder_factory
    _model: ChatModel | None = field(default=None, repr=False)
    _embedder: Embedder | None = field(default=None, repr=False)
    # (session, tool) pairs the user answered "always" for (tool approval).
    approved_tools: set[tuple[str, str]] = field(default_factory=set)
    # Where a service says something went other than asked, without failing.
    warn: Callable[[str], None] = field(default=lambda text: _stderr_warning(text))
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
        folders = [self.config.folder, Path.cwd()]
        return build_pipeline(self.settings.chat_memory.preprocessors, folders)

    @cached_property
    def toolbox(self) -> ToolBox:
        """Tools from config, imported at start-up so a bad entry fails before any turn."""
        from koogcli.adapters.tools.python_tools import PythonToolBox, build_tool

        folders = [self.config.folder, Path.cwd()]
        tools = []
        for index, spec in enumerate(self.settings.tools):
            key = f"tools.{index}"
            function = callables.resolve(spec.callable, folders, key=f"{key}.callable")
            undo = (
                callables.resolve(spec.rollback, folders, key=f"{key}.rollback")
                if spec.rollback
                else None
            )
            common = self.settings.tool_settings
            ask = spec.ask or common.ask
            limit = spec.timeout_seconds or common.timeout_seconds
            tools.append(build_tool(spec.callable, function, undo, ask=ask, timeout=limit))
        return PythonToolBox(tools, self.settings.tool_settings.max_result_bytes)

    @cached_property
    def storage(self) -> StorageBackend:
        """Files under the data dir, or PostgreSQL when `storage.url` is set. The config is
        loaded only when the environment or the file may name a database, so commands on
        the file backend stay as fast as before."""
        settings = None
        if self.env.get("KOOG_DATABASE_URL") or _mentions_storage(self.config_file):
            settings = self.settings.storage
        if settings is not None and settings.url:
            timeouts = (settings.lock_timeout_seconds, settings.statement_timeout_seconds)
            return open_backend(settings.url, settings.db_schema, settings.language, timeouts)
        from koogcli.adapters.files.backend import FileBackend

        files = FileBackend(self.data)
        self.finished_moves = files.finish_moves()  # before anything is read
        for done in self.finished_moves:
            what = (
                f"the rename of {done[1]} to {done[2]}"
                if done[0] == "rename"
                else (f"the deletion of {done[1]}")
            )
            self.warn(f"finished {what}, which a koog that was stopped had left halfway")
        return files

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

    def turn_owner(self) -> dict[str, object]:
        """This process, as recorded in a turn's step checkpoints."""
        return self.storage.turn_owner()

    def owner_alive(self, owner: object) -> bool:
        return self.storage.owner_alive(owner if isinstance(owner, dict) else None)

    def keep_reserve(self) -> None:
        """Room on the data dir's disk for closing a failed turn (adapters/files/reserve.py)."""
        from koogcli.adapters.files import reserve

        reserve.keep(self.data.reserve_file)

    def spend_reserve(self) -> bool:
        from koogcli.adapters.files import reserve

        return reserve.spend(self.data.reserve_file)

    @cached_property
    def memory_store(self) -> MemoryStore:
        return self.storage.memory(self.warn)

    @cached_property
    def learned_limits(self) -> LearnedLimits:
        """Context sizes servers named when they refused a request (adapters/model/learned_limits)."""
        from koogcli.adapters.model.learned_limits import LearnedLimits

        return LearnedLimits(self.data.learned_file)

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
    def memory(self) -> ChatMemory:
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
        for shared in ("storage", "pipeline", "toolbox", "memory_store", "learned_limits"):
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
        configured at all and no local server answers.

        A local server (a loopback base URL, or one found on a known port) rarely has the
        default model, so with no model configured its first listed model is used: in a
        new context, this one is left as it is."""
        if self.model_factory is not openai_model_factory:
            return self, None
        from koogcli.adapters.model import local_servers
        from koogcli.adapters.model.openai_model import resolve_endpoint
        from koogcli.core.errors import EndpointNotConfiguredError
        from koogcli.core.urls import is_loopback

        llm = self.settings.llm
        try:
            endpoint = resolve_endpoint(
                llm.base_url, llm.api_key_env, self.env, llm.timeout_seconds, llm.max_retries
            )
        except EndpointNotConfiguredError:
            listed = self.env.get("KOOG_LOCAL_SERVERS")
            found = local_servers.find(listed.split(",") if listed else local_servers.DEFAULT_URLS)
            if found is None:
                raise
            url, first_model = found
            local = self._local(url, first_model)
            return local, f"using the local server at {url} (model {local.settings.llm.model})"
        if "llm.model" in self.config.provenance or not is_loopback(endpoint.base_url):
            return self, None
        found = local_servers.find([endpoint.base_url])
        if found is None:
            return self, None  # it does not answer /models: the request will say what is wrong
        local = self._local(None, found[1])
        return local, (
            f"using model {local.settings.llm.model}, the first that {endpoint.shown_url} "
            "lists (llm.model, KOOG_MODEL or -m choose another)"
        )

    def _local(self, url: str | None, first_model: str) -> AppContext:
        """Settings with a local server's URL (when found) and, unless configured, model."""
        llm = self.settings.llm
        update: dict[str, object] = {} if url is None else {"base_url": url}
        if "llm.model" not in self.config.provenance:
            update["model"] = first_model
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


def build(
    config_flag: str | None = None,
    data_dir_flag: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    model_factory: ModelFactory | None = None,
    embedder_factory: EmbedderFactory | None = None,
    warn: Callable[[str], None] | None = None,
) -> AppContext:
    env = dict(os.environ) if env is None else env
    config_file, explicit = paths.config_path(config_flag, env)

    def load_config() -> LoadedConfig:
        from koogcli.config import loader

        return loader.load(config_file, explicit=explicit, env=env, flags=flags)

    data = paths.DataDir(paths.data_dir(data_dir_flag, env))
    return AppContext(
        load_config=load_config,
        data=data,
        env=env,
        config_file=config_file,
        model_factory=model_factory or openai_model_factory,
        embedder_factory=embedder_factory or openai_embedder_factory,
        warn=warn or _stderr_warning,
    )


def open_backend(
    where: str,
    schema: str,
    language: str = "english",
    timeouts: tuple[float, float] = (10.0, 60.0),
) -> StorageBackend:
    """A PostgreSQL URL, or a data dir: the backend it names."""
    if where.startswith(("postgresql://", "postgres://")):
        from koogcli.adapters.postgres.backend import PostgresBackend

        return PostgresBackend(where, schema, language, timeouts)
    from koogcli.adapters.files.backend import FileBackend

    return FileBackend(paths.DataDir(Path(where).expanduser()))


def _stderr_warning(text: str) -> None:
    import sys

    sys.stderr.write(f"koog: warning: {text}\n")


def _mentions_storage(config_file: Path | None) -> bool:
    """Whether the config file sets `[storage] url` (read with tomllib alone: the full,
    validated load then decides; a file tomllib cannot read goes to that load too, which
    names the problem)."""
    if config_file is None:
        return False
    import tomllib

    try:
        with config_file.open("rb") as handle:
            raw = handle.read(1024 * 1024 + 1)  # the loader refuses more
    except OSError:
        return False
    if b"storage" not in raw:
        return False  # the common case, without parsing
    try:
        table = tomllib.loads(raw.decode("utf-8")).get("storage")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
        return True
    return isinstance(table, dict) and bool(table.get("url"))


def build_pipeline(specs: Sequence[PreprocessorSpec], folders: Sequence[Path]) -> Pipeline:
    """Preprocessors from config, in order; custom callables are imported here, at start-up.
    Patterns are applied with a time bound (adapters/tools/bounded_regex.py)."""
    from koogcli.config.schema import CustomSpec, FilterSpec, RedactSpec, TokenWindowSpec
    from koogcli.core import preprocessors

    def pattern(text: str | None, key: str) -> BoundedPattern | None:
        if not text:
            return None
        from koogcli.adapters.tools.bounded_regex import BoundedPattern  # only with a pattern

        return BoundedPattern(text, key)

    steps: list[preprocessors.Preprocessor] = []
    for index, spec in enumerate(specs):
        key = f"chat_memory.preprocessors.{index}"
        if isinstance(spec, FilterSpec):
            steps.append(
                preprocessors.FilterPreprocessor(
                    roles=frozenset(spec.roles) if spec.roles is not None else None,
                    min_chars=spec.min_chars,
                    max_chars=spec.max_chars,
                    include_regex=pattern(spec.include_regex, f"{key}.include_regex"),
                    exclude_regex=pattern(spec.exclude_regex, f"{key}.exclude_regex"),
                )
            )
        elif isinstance(spec, RedactSpec):
            redact = pattern(spec.pattern, f"{key}.pattern")
            assert redact is not None  # the schema requires a pattern
            steps.append(preprocessors.RedactPreprocessor(redact, spec.replacement))
        elif isinstance(spec, CustomSpec):
            function = callables.resolve(spec.callable, folders, key=f"{key}.callable")
            steps.append(preprocessors.CustomPreprocessor(spec.callable, function))
        elif isinstance(spec, TokenWindowSpec):
            steps.append(preprocessors.TokenWindowPreprocessor(spec.max_tokens))
        else:
            steps.append(preprocessors.WindowPreprocessor(spec.size))
    return preprocessors.Pipeline(tuple(steps))


def locate_config(flag: str | None, env: Mapping[str, str] | None) -> tuple[Path, bool]:
    return paths.config_path(flag, dict(os.environ) if env is None else env)


def write_private_file(path: Path, text: str) -> None:
    from koogcli.adapters import atomic

    atomic.write_text(path, text)


def history_document(
    session: SessionName, messages: Sequence[Message], revision: int, updated_at: str
) -> dict[str, object]:
    """The export shape is the file provider's own document, so exports re-import anywhere."""
    import json

    from koogcli.adapters.codec.documents import dump_history

    return dict(
        json.loads(dump_history(session.value, revision, updated_at, messages, summary=False))
    )


def parse_history_document(text: str, source: str) -> list[Message]:
    """Messages from an export document, JSON Lines (`history show --format jsonl`), or a
    list of messages, koog's or a plain OpenAI `messages` array (ids and times filled in)."""
    import json

    from koogcli.adapters.codec.documents import parse_history, parse_messages
    from koogcli.core.messages import new_id, utc_now

    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise
        raw = [json.loads(line) for line in lines]
    if isinstance(raw, dict) and "role" in raw and "messages" not in raw:
        raw = [raw]  # JSON Lines of one line: one message, not an export document
    if isinstance(raw, list):
        filled = [
            {"id": new_id(), "created_at": utc_now(), "content": None, **m}
            if isinstance(m, dict)
            else m
            for m in raw
        ]
        return parse_messages(filled, source)
    return parse_history(raw, Path(source))[1]
