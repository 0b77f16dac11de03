"""Which protocol, server and key a model is reached with: `[llm]`, with what
`[models."NAME"]` says of that model (SPEC §3, §6)."""

from __future__ import annotations

from collections.abc import Mapping

from koogcli.config.schema import LLMSettings, Settings


def llm_for(settings: Settings, model: str) -> LLMSettings:
    """`[llm]` with what `[models."MODEL"]` says of its protocol and server."""
    llm = settings.llm
    spec = settings.models.get(model)
    if spec is None:
        return llm
    update: dict[str, object] = {}
    if spec.wire_api is not None and spec.wire_api != llm.wire_api:
        # Another protocol without a server named: the provider's own, with its key.
        update = {"wire_api": spec.wire_api, "base_url": ""}
        update["api_key_env"] = (
            "ANTHROPIC_API_KEY" if spec.wire_api == "messages" else ("OPENAI_API_KEY")
        )
    update.update(
        {
            name: value
            for name in ("base_url", "api_key_env")
            if (value := getattr(spec, name)) is not None
        }
    )
    return llm.model_copy(update=update) if update else llm


def require_key(llm: LLMSettings, env: Mapping[str, str]) -> None:
    """A provider's protocol without its key (and no server of one's own) is named here."""
    wire = llm.wire_api
    key_env = llm.key_env(wire)
    if llm.base_url or env.get(key_env):
        return
    from koogcli.core.errors import UsageError

    provider = "Anthropic" if wire == "messages" else "OpenAI"
    raise UsageError(
        f"no API key in {key_env} (llm.wire_api = {wire!r} talks to {provider}'s API)",
        hint=f"export {key_env}=..., set llm.api_key_env, or set llm.base_url to a server "
        f"that speaks {'Anthropic Messages' if wire == 'messages' else 'the Responses API'}",
    )
