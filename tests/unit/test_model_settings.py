"""Which protocol, server and key each model is reached with (`wire_api`, SPEC §3, §6)."""

from __future__ import annotations

import pytest

from koogcli.config.schema import Settings
from koogcli.core.errors import UsageError
from koogcli.services.model_settings import llm_for, require_key


def test_messages_reads_the_anthropic_key_unless_told_otherwise() -> None:
    plain = Settings.model_validate({"llm": {"wire_api": "messages"}})
    assert plain.llm.key_env("messages") == "ANTHROPIC_API_KEY"
    told = Settings.model_validate({"llm": {"wire_api": "messages", "api_key_env": "MINE"}})
    assert told.llm.key_env("messages") == "MINE"
    assert Settings().llm.key_env("chat") == "OPENAI_API_KEY"


def test_a_model_of_another_protocol_goes_to_its_providers_server_with_its_key() -> None:
    settings = Settings.model_validate(
        {
            "llm": {"base_url": "http://127.0.0.1:8080/v1", "api_key_env": "LOCAL_KEY"},
            "models": {
                "claude-x": {"wire_api": "messages"},
                "local-r": {"wire_api": "responses", "base_url": "http://127.0.0.1:9/v1"},
            },
        }
    )
    claude = llm_for(settings, "claude-x")
    assert (claude.wire_api, claude.base_url) == ("messages", "")
    assert claude.key_env("messages") == "ANTHROPIC_API_KEY"
    local = llm_for(settings, "local-r")
    assert (local.wire_api, local.base_url) == ("responses", "http://127.0.0.1:9/v1")
    assert llm_for(settings, "other") is settings.llm


def test_a_missing_key_names_its_variable() -> None:
    llm = Settings.model_validate({"llm": {"wire_api": "messages"}}).llm
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        require_key(llm, {})
    require_key(llm, {"ANTHROPIC_API_KEY": "k"})
    with pytest.raises(Exception, match="wire_api"):
        Settings.model_validate({"llm": {"wire_api": "grpc"}})
