"""Prompt-cache use made visible (SPEC §5.4a): the test server keeps llama-server's one
slot and reports the tokens it reused; `koog why`, `chat -u`, `chat --json` and `koog
serve`'s answers show them, and say nothing when the server reported nothing."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import forked_run_koog
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe

pytestmark = pytest.mark.e2e

run_koog = pytest.fixture(name="run_koog")(forked_run_koog)

Run = Callable[..., subprocess.CompletedProcess[str]]
CACHE_LINE = re.compile(r"prompt cache: ([\d,]+) of ([\d,]+) tokens reused")


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _figures(text: str) -> tuple[int, int]:
    found = CACHE_LINE.search(text)
    assert found is not None, text
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))


def test_the_second_turn_shows_the_prefix_the_server_reused(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    _ok(run_koog("chat", "-s", "c", "What is the capital of Italy?"))
    second = run_koog("chat", "-s", "c", "And of Norway?", "-u")
    assert second.returncode == 0 and second.stdout == "echo: And of Norway?\n"
    reported = server.cache_log[-1]
    # The second request starts with the first one: all of it but its last token reused.
    assert reported["cached_tokens"] == server.cache_log[0]["prompt_tokens"] - 1
    said = (reported["cached_tokens"], reported["prompt_tokens"])
    assert _figures(second.stderr) == said  # -u
    why = _ok(run_koog("why", "-s", "c"))
    assert _figures(why) == said and said[0] > 0
    # Turn 1 was read whole: the server said 0, and so does koog.
    assert _figures(_ok(run_koog("why", "-s", "c", "--turn", "1")))[0] == 0
    shown = json.loads(_ok(run_koog("why", "-s", "c", "--json")))
    assert shown["usage"]["cached_tokens"] == said[0]
    assert shown["usage"]["prompt_tokens"] == said[1]
    third = json.loads(_ok(run_koog("chat", "-s", "c", "And of Peru?", "--json")))
    assert third["usage"]["cached_tokens"] == server.cache_log[-1]["cached_tokens"] > said[0]
    stored = json.loads(_ok(run_koog("history", "show", "-s", "c", "--json")))
    assert stored[-1]["meta"]["usage"]["cached_tokens"] == third["usage"]["cached_tokens"]


def test_a_server_that_reports_no_cache_gets_no_cache_line(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    server.prompt_cache = False
    _ok(run_koog("chat", "-s", "n", "one"))
    second = run_koog("chat", "-s", "n", "two", "-u")
    assert second.returncode == 0 and second.stderr.startswith("tokens: ")
    assert "prompt cache" not in second.stderr
    assert "prompt cache" not in _ok(run_koog("why", "-s", "n"))
    assert json.loads(_ok(run_koog("why", "-s", "n", "--json")))["usage"]["cached_tokens"] is None
    made = json.loads(_ok(run_koog("chat", "-s", "n", "three", "--json")))
    assert made["usage"]["cached_tokens"] is None
    stored = json.loads(_ok(run_koog("history", "show", "-s", "n", "--json")))
    assert "cached_tokens" not in stored[-1]["meta"]["usage"]


def test_serve_passes_the_upstreams_cached_tokens_to_its_client(
    serve_files: KoogServe, server: FakeOpenAIServer
) -> None:
    client = serve_files.client(default_headers={"X-Koog-Session": "cache"})
    convo: list[Any] = [{"role": "user", "content": "What is the capital of Italy?"}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=convo)
    convo += [
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "And of Norway?"},
    ]
    with client.chat.completions.create(
        model="gpt-4o-mini",
        messages=convo,
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        usage = [c.usage for c in stream if c.usage is not None][-1]
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == server.cache_log[-1]["cached_tokens"] > 0
