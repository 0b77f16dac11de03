"""The upstream's key reaches no client, whatever its shape (issue 51, acceptance 4).

An upstream quotes the key koog sent it, whole and masked as providers mask keys, in a 401
body and in an error event in the middle of a stream. On every upstream protocol, through
every client protocol (passed through and translated), streamed and not, and in `koog
chat`'s error line, the client sees `[key removed]` and never the key; nor does the
server's log or any file koog wrote. The keys are of shapes no key pattern knows: hex,
Google's `AIza…`, Groq's `gsk_…`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
KEYS = {
    "chat": "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c",
    "responses": "AIzaSyB3xQ7vLm2Kp9Wd4Rt6Yh8Nc1Fg5Js0Zq",
    "messages": "gsk_T4w9Qm2Lx7Zr5Nb8Vc3Kd6Hf1Jg0Ps2Ye4Ua7Wi9Ro",
}
BODIES: dict[str, tuple[str, dict[str, object]]] = {
    "chat": (
        "/chat/completions",
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "messages": (
        "/messages",
        {"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    ),
    "responses": ("/responses", {"model": "gpt-4o-mini", "input": "hi", "store": False}),
}


def _quote(key: str) -> str:
    """What an upstream says, quoting the key: masked as OpenAI masks it, first and last
    characters around an ellipsis, and whole."""
    return (
        f"Incorrect API key provided: {key[:6]}****{key[-4:]} ({key[:3]}...{key[-3:]}); "
        f"the request said Authorization: Bearer {key}"
    )


def _shown(text: str, key: str) -> list[str]:
    """Whatever of the key `text` shows."""
    return [
        form
        for form in (key, f"{key[:6]}****", f"****{key[-4:]}", f"...{key[-3:]}", key[4:20])
        if form in text
    ]


def _config(path: Path, server: FakeOpenAIServer, wire: str, key: str) -> dict[str, str]:
    path.write_text(
        f'[llm]\nmodel = "up"\nbase_url = "{server.base_url}"\nwire_api = "{wire}"\n'
        "max_retries = 0\n"
    )
    return {
        "KOOG_CONFIG": str(path),
        "OPENAI_API_KEY": key,
        "ANTHROPIC_API_KEY": key,
        "KOOG_MODEL": "",
    }


@pytest.mark.parametrize("wire", ["chat", "responses", "messages"])
def test_an_upstream_quoting_its_key_in_any_shape_shows_it_to_no_client(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Run,
    wire: str,
) -> None:
    import httpx2

    key = KEYS[wire]
    env = _config(isolated / "upstream.toml", server, wire, key)
    log = isolated / "serve.log"
    started = KoogServe({**koog_env, **env}, log=log).start()
    seen: dict[str, str] = {}
    try:
        for protocol, (path, body) in BODIES.items():
            for stream in (False, True):
                script = (
                    {"content": "one two three", "error_event": _quote(key)}
                    if stream
                    else {"status": 401, "message": _quote(key), "code": "invalid_api_key"}
                )
                server.enqueue(script)
                answer = httpx2.post(
                    started.url + path,
                    json={**body, "stream": stream},
                    headers={"anthropic-version": "2023-06-01", "X-Koog-Session": "keyed"},
                    timeout=30,
                )
                where = f"{protocol} {'streamed' if stream else 'whole'}"
                assert answer.status_code == (200 if stream else 401), (where, answer.text)
                seen[where] = answer.text
    finally:
        assert started.stop() == 0
    for where, text in seen.items():
        assert not _shown(text, key), (where, text)
        assert "[key removed]" in text, (where, text)
    server.enqueue({"status": 400, "message": _quote(key)})
    refused = run_koog("chat", "-s", "cli", "hi", env=env)
    server.enqueue({"content": "one two three", "error_event": _quote(key)})
    broken = run_koog("chat", "-s", "cli", "hi", env=env)
    for done in (refused, broken):
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("koog: error: ") and "[key removed]" in done.stderr
        assert not _shown(done.stderr + done.stdout, key), done.stderr
    assert not _shown(log.read_text(), key)
    for file in (isolated / "data").rglob("*"):
        if file.is_file():
            assert key.encode() not in file.read_bytes(), file
