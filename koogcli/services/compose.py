"""The composition root: the one services module that imports adapters (HOUSE_STYLE §1).

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
from koogcli.core.model_port import ChatModel
from koogcli.core.names import SessionName
from koogcli.core.ports import Embedder, LearnedFacts, StorageBackend
from koogcli.core.tool_ports import McpCatalog, ToolBox
from koogcli.services.context import AppContext, EmbedderFactory, ModelFactory, Parts

if TYPE_CHECKING:
    from koogcli.adapters.model.messages_upstream import MessagesChatModel
    from koogcli.adapters.model.openai_model import Endpoint, OpenAIChatModel
    from koogcli.adapters.model.responses_upstream import ResponsesChatModel
    from koogcli.adapters.tools.bounded_regex import BoundedPattern
    from koogcli.adapters.tools.mcp_hub import McpHub
    from koogcli.adapters.tools.python_tools import PythonToolBox
    from koogcli.config.loader import LoadedConfig
    from koogcli.config.schema import LLMSettings, PreprocessorSpec
    from koogcli.core.agent_edits import AgentFiles
    from koogcli.core.preprocessors import Pipeline


def openai_model_factory(ctx: AppContext) -> ChatModel:
    return _chat(ctx)


def forwarding_model_factory(ctx: AppContext) -> ChatModel:
    """`koog serve`'s model: streamed requests forwarded as bytes (model/forwarding.py)."""
    return _chat(ctx, forward=True)


def _chat(ctx: AppContext, forward: bool = False) -> ChatModel:
    """The model client: chat completions, or each model's own protocol and server
    (`[models."NAME"]` wire_api, base_url, api_key_env over `[llm]`)."""
    llm = ctx.settings.llm
    if llm.wire_api == "chat" and not any(
        spec.wire_api or spec.base_url or spec.api_key_env for spec in ctx.settings.models.values()
    ):
        return _keyless(_openai_chat(ctx, llm, forward))
    from koogcli.adapters.model.wire_router import WireRouter

    def build(model: str) -> tuple[tuple[str, ...], Callable[[], ChatModel]]:
        from koogcli.services.model_settings import llm_for

        chosen = llm_for(ctx.settings, model)
        where = (chosen.wire_api, chosen.base_url, chosen.key_env(chosen.wire_api))
        if chosen.wire_api == "chat":
            return where, lambda: _keyless(_openai_chat(ctx, chosen, forward))
        return where, lambda: _keyless(_native(ctx, chosen))

    return WireRouter(build)


def _keyless(model: OpenAIChatModel | MessagesChatModel | ResponsesChatModel) -> ChatModel:
    """The client, its upstream's words passing the key's scrub (SPEC §6: the upstream key
    never leaves the server)."""
    from koogcli.adapters.model.keyless import KeylessModel, sent_key

    return KeylessModel(model, sent_key(model.endpoint))


def _endpoint(ctx: AppContext, llm: LLMSettings, base_url: str, key_env: str) -> Endpoint:
    """`llm`'s endpoint at `base_url`, its key read from `key_env` (§5.8)."""
    from koogcli.adapters.model.openai_model import resolve_endpoint

    timeouts = (llm.timeout_seconds, llm.max_retries, llm.turn_timeout_seconds)
    return resolve_endpoint(base_url, key_env, ctx.env, *timeouts)


def _native(ctx: AppContext, llm: LLMSettings) -> MessagesChatModel | ResponsesChatModel:
    from koogcli.adapters.model.openai_model import RequestOptions

    wire = llm.wire_api
    from koogcli.services.model_settings import require_key

    require_key(llm, ctx.env)
    options = RequestOptions(llm.max_tokens, llm.reasoning_effort, dict(llm.extra_body))
    if wire == "messages":
        from koogcli.adapters.model.messages_upstream import (
            ANTHROPIC_DEFAULT_URL,
            MessagesChatModel,
        )

        endpoint = _endpoint(ctx, llm, llm.base_url or ANTHROPIC_DEFAULT_URL, llm.key_env(wire))
        return MessagesChatModel(endpoint, options)
    from koogcli.adapters.model.responses_upstream import ResponsesChatModel

    return ResponsesChatModel(_endpoint(ctx, llm, llm.base_url, llm.key_env(wire)), options)


def _openai_chat(ctx: AppContext, llm: LLMSettings, forward: bool = False) -> OpenAIChatModel:
    from koogcli.adapters.model.openai_model import OpenAIChatModel, RequestOptions

    return OpenAIChatModel(
        _endpoint(ctx, llm, llm.base_url, llm.api_key_env),
        RequestOptions(llm.max_tokens, llm.reasoning_effort, dict(llm.extra_body)),
        forward=forward,
    )


def openai_embedder_factory(ctx: AppContext) -> Embedder:
    from koogcli.adapters.model.keyless import KeylessEmbedder, sent_key
    from koogcli.adapters.model.openai_model import OpenAIEmbedder

    chat = _openai_chat(ctx, ctx.settings.llm)
    embedder = OpenAIEmbedder(chat, ctx.settings.long_term_memory.embeddings.model)
    return KeylessEmbedder(embedder, sent_key(chat.endpoint))


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


WRONG_PATH = (
    "{url}/models answered HTTP 404, so koog found no model there: check the base URL's path "
    "(llama.cpp, Ollama and LM Studio serve their API under /v1)"
)


def find_endpoint(ctx: AppContext) -> tuple[AppContext, str | None]:
    """The context a command talks to the model through, and a line to show when a
    local server's model is used; the first-run guide (exit 2) when no endpoint is
    configured at all and no local server answers.

    A local server (a loopback base URL, or one found on a known port) rarely has the
    default model, so with no model configured its first listed model is used: in a
    new context, this one is left as it is."""
    # A test's model has no endpoint; koog serve's forwarder talks to the same one as chat
    # (its model too: every protocol goes upstream with the model `koog chat` would use).
    if ctx.model_factory not in (openai_model_factory, forwarding_model_factory):
        return ctx, None
    from koogcli.adapters.model import local_servers
    from koogcli.adapters.model.openai_model import resolve_endpoint
    from koogcli.core.errors import EndpointNotConfiguredError
    from koogcli.core.urls import is_loopback

    llm = ctx.settings.llm
    if llm.wire_api != "chat":  # a provider's own protocol: no local server is guessed
        from koogcli.services.model_settings import require_key

        require_key(llm, ctx.env)
        return ctx, None
    try:
        endpoint = resolve_endpoint(
            llm.base_url, llm.api_key_env, ctx.env, llm.timeout_seconds, llm.max_retries
        )
    except EndpointNotConfiguredError:
        listed = ctx.env.get("KOOG_LOCAL_SERVERS")
        found = local_servers.find(listed.split(",") if listed else local_servers.DEFAULT_URLS)
        if found is None:
            raise
        url, first_model = found
        local = ctx.with_local(url, first_model)
        return local, f"using the local server at {url} (model {local.settings.llm.model})"
    if not is_loopback(endpoint.base_url):
        return ctx, None
    if "llm.model" in ctx.config.provenance:
        return ctx.with_local(None, None), None
    found = local_servers.find([endpoint.base_url])
    if found is None:  # no model to take: a wrong path is said now, the rest by the request
        wrong = local_servers.models_status(endpoint.base_url) == 404
        return ctx.with_local(None, None), WRONG_PATH.format(
            url=endpoint.shown_url
        ) if wrong else None
    local = ctx.with_local(None, found[1])
    return local, (
        f"using model {local.settings.llm.model}, the first that {endpoint.shown_url} "
        "lists (llm.model, KOOG_MODEL or -m choose another)"
    )


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


PARTS = Parts(
    storage=open_storage,
    toolbox=build_toolbox,
    pipeline=build_pipeline_for,
    learned=learned_facts,
    reserve=reserve,
    endpoint=find_endpoint,
    agent_files=agent_files,
)


def serve_token(ctx: AppContext) -> str:
    """The token koog serve requires where it cannot tell who connects (made on first use,
    kept in the data dir)."""
    from koogcli.adapters.files.serve_token import kept_token

    return kept_token(ctx.data.root)
