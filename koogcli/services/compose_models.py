"""The composition root's model side (services/compose.py holds the rest): which client
talks to the configured endpoint in its protocol (chat completions, Responses, Messages),
the embedder, and which endpoint a command uses (a local server found, a wrong path said).
With compose.py, the only services modules that import adapters (HOUSE_STYLE §1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from koogcli.core.model_port import ChatModel
from koogcli.core.ports import Embedder
from koogcli.services.context import AppContext

if TYPE_CHECKING:
    from koogcli.adapters.model.chat_upstream import OpenAIChatModel
    from koogcli.adapters.model.endpoint import Endpoint
    from koogcli.adapters.model.messages_upstream import MessagesChatModel
    from koogcli.adapters.model.responses_upstream import ResponsesChatModel
    from koogcli.config.schema import LLMSettings


def openai_model_factory(ctx: AppContext) -> ChatModel:
    return _chat(ctx)


def _chat(ctx: AppContext) -> ChatModel:
    """The model client: chat completions, or each model's own protocol and server
    (`[models."NAME"]` wire_api, base_url, api_key_env over `[llm]`)."""
    llm = ctx.settings.llm
    if llm.wire_api == "chat" and not any(
        spec.wire_api or spec.base_url or spec.api_key_env for spec in ctx.settings.models.values()
    ):
        return _keyless(_openai_chat(ctx, llm))
    from koogcli.adapters.model.wire_router import WireRouter

    def build(model: str) -> tuple[tuple[str, ...], Callable[[], ChatModel]]:
        from koogcli.services.model_settings import llm_for

        chosen = llm_for(ctx.settings, model)
        where = (chosen.wire_api, chosen.base_url, chosen.key_env(chosen.wire_api))
        if chosen.wire_api == "chat":
            return where, lambda: _keyless(_openai_chat(ctx, chosen))
        return where, lambda: _keyless(_native(ctx, chosen))

    return WireRouter(build)


def _keyless(model: OpenAIChatModel | MessagesChatModel | ResponsesChatModel) -> ChatModel:
    """The client, its upstream's words passing the key's scrub (SPEC §6: the upstream key
    never leaves the server)."""
    from koogcli.adapters.model.keyless import KeylessModel, sent_key

    return KeylessModel(model, sent_key(model.endpoint))


def _endpoint(ctx: AppContext, llm: LLMSettings, base_url: str, key_env: str) -> Endpoint:
    """`llm`'s endpoint at `base_url`, its key read from `key_env` (§5.8)."""
    from koogcli.adapters.model.endpoint import resolve_endpoint

    timeouts = (llm.timeout_seconds, llm.max_retries, llm.turn_timeout_seconds)
    return resolve_endpoint(base_url, key_env, ctx.env, *timeouts)


def _native(ctx: AppContext, llm: LLMSettings) -> MessagesChatModel | ResponsesChatModel:
    from koogcli.adapters.model.endpoint import RequestOptions

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


def _openai_chat(ctx: AppContext, llm: LLMSettings) -> OpenAIChatModel:
    from koogcli.adapters.model.chat_upstream import OpenAIChatModel
    from koogcli.adapters.model.endpoint import RequestOptions

    return OpenAIChatModel(
        _endpoint(ctx, llm, llm.base_url, llm.api_key_env),
        RequestOptions(llm.max_tokens, llm.reasoning_effort, dict(llm.extra_body)),
    )


def openai_embedder_factory(ctx: AppContext) -> Embedder:
    from koogcli.adapters.model.chat_upstream import OpenAIEmbedder
    from koogcli.adapters.model.keyless import KeylessEmbedder, sent_key

    chat = _openai_chat(ctx, ctx.settings.llm)
    embedder = OpenAIEmbedder(chat, ctx.settings.long_term_memory.embeddings.model)
    return KeylessEmbedder(embedder, sent_key(chat.endpoint))


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
    if ctx.model_factory is not openai_model_factory:
        return ctx, None
    from koogcli.adapters.model import local_servers
    from koogcli.adapters.model.endpoint import resolve_endpoint
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
