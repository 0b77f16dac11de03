"""The doubles in tests/fakes stand in for the ports they claim to: `mypy --strict
tests/fakes` checks these assignments (a double that drifts from its protocol fails)."""

from __future__ import annotations

from koogcli.core.model_port import ChatModel
from tests.fakes.chat_model import FakeChatModel


def _conforms() -> None:
    model: ChatModel = FakeChatModel()
    del model
