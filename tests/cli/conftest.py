"""The CLI in-process: `koog(*args)` runs the Typer app with the fake model, as CliRunner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from koogcli.cli.app import Globals, app
from tests.fakes.chat_model import FakeChatModel


@pytest.fixture
def koog(fake_model: FakeChatModel) -> Callable[..., Any]:
    def invoke(*args: str, input: str | None = None) -> Any:
        globals_ = Globals(model_factory=lambda ctx: fake_model)
        return CliRunner().invoke(app, list(args), input=input, obj=globals_)

    return invoke
