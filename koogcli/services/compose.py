"""The composition root: with compose_models.py (the model and embedder clients, the
endpoint), the services modules that import adapters (HOUSE_STYLE §1).

It chooses and builds every part a command uses (storage, model and embedder clients,
pipeline, toolbox, learned facts, reserve, endpoint, the agents' file journal); `build`
returns the AppContext recording them, each built on first use (a command that needs no
model never imports the SDK) with the context's warning sink. The export codecs and
private-file writing live here too: adapters' work that services call by name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from koogcli.adapters import paths
from koogcli.core import callables
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import LearnedFacts, StorageBackend, StoreReader
from koogcli.core.tool_ports import McpCatalog, ToolBox
from koogcli.services.compose_models import (
    find_endpoint,
    openai_embedder_factory,
    openai_model_factory,
)
from koogcli.services.context import AppContext, EmbedderFactory, ModelFactory, Parts

if TYPE_CHECKING:
    from koogcli.adapters.tools.bounded_regex import BoundedPattern
    from koogcli.adapters.tools.mcp_hub import McpHub
    from koogcli.adapters.tools.python_tools import PythonToolBox
    from koogcli.config.loader import LoadedConfig
    from koogcli.config.schema import PreprocessorSpec
    from koogcli.core.agent_edits import AgentFiles
    from koogcli.core.preprocessors import Pipeline


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
        parts=PARTS,
        config_file=config_file,
        model_factory=model_factory or openai_model_factory,
        embedder_factory=embedder_factory or openai_embedder_factory,
        warn=warn or _stderr_warning,
    )


def build_toolbox(ctx: AppContext) -> ToolBox:
    """Tools from config, imported at start-up so a bad entry fails before any turn."""
    from koogcli.adapters.tools.python_tools import PythonToolBox, build_tool

    folders = [ctx.config.folder, Path.cwd()]
    tools = []
    for index, spec in enumerate(ctx.settings.tools):
        key = f"tools.{index}"
        function = callables.resolve(spec.callable, folders, key=f"{key}.callable")
        undo = (
            callables.resolve(spec.rollback, folders, key=f"{key}.rollback")
            if spec.rollback
            else None
        )
        common = ctx.settings.tool_settings
        ask = spec.ask or common.ask
        limit = spec.timeout_seconds or common.timeout_seconds
        tools.append(build_tool(spec.callable, function, undo, ask=ask, timeout=limit))
    python = PythonToolBox(tools, ctx.settings.tool_settings.max_result_bytes)
    if not any(server.enabled for server in ctx.settings.mcp.servers):
        return python  # the MCP SDK is never imported
    return _with_mcp(ctx, python, folders)


_MCP_HUBS: dict[str, McpHub] = {}


def mcp_catalog(ctx: AppContext) -> McpCatalog | None:
    """The MCP servers' catalog; None when no server is configured."""
    box = ctx.toolbox
    from koogcli.adapters.tools.toolboxes import ToolBoxes

    return box.mcp if isinstance(box, ToolBoxes) else None


def _with_mcp(ctx: AppContext, python: PythonToolBox, folders: list[Path]) -> ToolBox:
    """koog's tools beside the MCP servers' (`SERVER__TOOL`), with their compensations."""
    from koogcli.adapters.tools.mcp_tools import McpToolBox
    from koogcli.adapters.tools.toolboxes import ToolBoxes
    from koogcli.core.errors import ConfigError
    from koogcli.core.mcp_config import server_of

    settings = ctx.settings.mcp
    servers = {s.name for s in settings.servers if s.enabled}
    for name in python.names():
        if server_of(name, servers):
            raise ConfigError(f"tool {name!r} has the name of an MCP server's tool")
    undo = {
        c.callable: callables.resolve(c.callable, folders, key=f"mcp.compensations.{i}.callable")
        for i, c in enumerate(settings.compensations)
        if c.callable
    }
    if any(s.enabled for s in settings.servers):
        from koogcli.adapters.extras import need

        need("mcp")
    from koogcli.adapters.tools.mcp_hub import McpHub
    from koogcli.adapters.tools.mcp_tool_cache import McpToolCache

    # One set of servers per process and configuration: a context built again (the REPL's
    # /role) keeps using the servers already running instead of starting more.
    key = settings.model_dump_json()
    hub = _MCP_HUBS.get(key)
    if hub is None:
        hub = _MCP_HUBS[key] = McpHub(settings.servers, ctx.env)
    mcp = McpToolBox(
        settings,
        ctx.env,
        undo,
        ctx.settings.tool_settings.max_result_bytes,
        hub=hub,
        warn=ctx.warn,
        ask_all=ctx.settings.tool_settings.ask,
        cache=McpToolCache(_data_dir(ctx).mcp_tools_file),
    )
    return ToolBoxes(python, mcp)


def open_storage(ctx: AppContext) -> StorageBackend:
    """Files under the data dir, or PostgreSQL when `storage.url` is set. The config is
    loaded only when the environment or the file may name a database, so commands on
    the file backend stay as fast as before."""
    settings = None
    if ctx.env.get("KOOG_DATABASE_URL") or _mentions_storage(ctx.config_file):
        settings = ctx.settings.storage
    if settings is not None and settings.url:
        timeouts = (settings.lock_timeout_seconds, settings.statement_timeout_seconds)
        return open_backend(settings.url, settings.db_schema, settings.language, timeouts)
    from koogcli.adapters.files.backend import FileBackend

    files = FileBackend(_data_dir(ctx), warn=lambda text: ctx.warn(text))
    ctx.finished_moves = files.finish_moves()  # before anything is read
    for done in ctx.finished_moves:
        what = (
            f"the rename of {done[1]} to {done[2]}"
            if done[0] == "rename"
            else (f"the deletion of {done[1]}")
        )
        ctx.warn(f"finished {what}, which a koog that was stopped had left halfway")
    return files


def _data_dir(ctx: AppContext) -> paths.DataDir:
    """The concrete data dir `build` gave the context (services see only DataPaths)."""
    assert isinstance(ctx.data, paths.DataDir), "contexts are built by compose.build"
    return ctx.data


def learned_facts(ctx: AppContext) -> LearnedFacts:
    """Context sizes servers named when they refused a request, and summary cuts."""
    from koogcli.adapters.model.learned_limits import LearnedLimits

    return LearnedLimits(_data_dir(ctx).learned_file)


def reserve(ctx: AppContext, spend: bool) -> bool:
    """Keep (spend=False) or free (spend=True) the data dir's room for closing a failed
    turn on a full disk (adapters/files/reserve.py)."""
    from koogcli.adapters.files import reserve as room

    if spend:
        return room.spend(_data_dir(ctx).reserve_file)
    room.keep(_data_dir(ctx).reserve_file)
    return True


def open_backend(
    where: str,
    schema: str,
    language: str = "english",
    timeouts: tuple[float, float] = (10.0, 60.0),
) -> StorageBackend:
    """A PostgreSQL URL, or a data dir: the backend it names."""
    if where.startswith(("postgresql://", "postgres://")):
        from koogcli.adapters.extras import need

        need("psycopg")
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


def build_pipeline_for(ctx: AppContext) -> Pipeline:
    folders = [ctx.config.folder, Path.cwd()]
    return build_pipeline(ctx.settings.chat_memory.preprocessors, folders)


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
            step_tokens = spec.step_tokens or preprocessors.default_step_tokens(spec.max_tokens)
            steps.append(
                preprocessors.TokenWindowPreprocessor(spec.max_tokens, step_tokens=step_tokens)
            )
        else:
            step = spec.step or preprocessors.default_step(spec.size)
            steps.append(preprocessors.WindowPreprocessor(spec.size, step))
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
    from koogcli.adapters.codec.documents import parse_import

    return parse_import(text, source)


def agent_files(ctx: AppContext) -> AgentFiles:
    from koogcli.adapters.files.agent_files import FileAgentFiles

    return FileAgentFiles(_data_dir(ctx))


def other_stores() -> Mapping[str, StoreReader]:
    from koogcli.adapters.stores.places import SOURCES

    return SOURCES


PARTS = Parts(
    storage=open_storage,
    toolbox=build_toolbox,
    pipeline=build_pipeline_for,
    learned=learned_facts,
    reserve=reserve,
    endpoint=find_endpoint,
    agent_files=agent_files,
    stores=other_stores,
)


def serve_token(ctx: AppContext) -> str:
    """The token koog serve requires where it cannot tell who connects (made on first use,
    kept in the data dir)."""
    from koogcli.adapters.files.serve_token import kept_token

    return kept_token(ctx.data.root)
