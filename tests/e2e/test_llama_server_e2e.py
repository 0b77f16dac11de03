"""A day with a local model (issue 52): the real llama.cpp `llama-server` (built once into a
cache, tests/support/llama_server.py) running SmolLM2-135M on a 512-token context, and the
real `koog` in front of it: a session that outgrows the context goes on, its compression
works, a cut reply says so, koog serve speaks every protocol to it, and the prompt cache
it reports is shown. (Tool calls are the fake server's `llamacpp` profile: SmolLM2's chat
template has no tools, and given a template that renders them, this llama-server enforces
no call for `tool_choice: required` and the 135M model answers in prose.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.llama_server import LlamaServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

Run = Callable[..., subprocess.CompletedProcess[str]]
PLACES = ("harbour", "lighthouse", "ferry", "market", "bakery", "library", "garden")


def notes(place: str) -> str:
    """About 200 tokens of plain prose a small model can summarise."""
    return (
        f"Here are my notes about the {place} in our town. Every morning people walk past "
        f"the {place} on their way to work, and many of them stop for a while. The old town "
        f"council wrote that the {place} was built more than a hundred years ago by local "
        f"families. In summer there are more visitors, and the streets around the {place} "
        "get crowded with tourists and cyclists. In winter it is quiet, and only the people "
        f"who live nearby come to the {place} in the evenings. My grandmother used to tell "
        f"stories about the {place}, about storms, festivals and long walks by the water. "
        "Last year the town repaired the roof and painted the walls, and now it looks new "
        f"again. Please tell me in two sentences what is special about the {place}."
    )


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    server = LlamaServer(512).start()
    yield server
    server.stop()


@pytest.fixture
def local(llama: LlamaServer, tmp_path: Path, koog_env: dict[str, str]) -> dict[str, str]:
    """koog's environment against the real server: short replies, sampling seeded so a
    run repeats itself."""
    config = tmp_path / "local.toml"
    config.write_text(
        "[llm]\nmax_tokens = 24\ntemperature = 0.3\n[llm.extra_body]\nseed = 7\n"
        "[compression]\nmax_summary_tokens = 64\n"
    )
    env = {k: v for k, v in koog_env.items() if k != "OPENAI_API_KEY"}
    return {**env, "OPENAI_BASE_URL": llama.base_url, "KOOG_CONFIG": str(config)}


def test_a_session_that_outgrows_the_context_goes_on_and_compresses(
    run_koog: Run, local: dict[str, str], tmp_path: Path
) -> None:
    """Acceptance 1: seven 200-token prompts in one session on a 512-token context all
    answer (llama-server's refusal is recognised, its n_ctx learned, the history compressed
    in parts that fit); `koog compress` of the session works; with automatic compression
    off, the refusal names `koog compress` and `koog rollback`."""
    for place in PLACES:
        done = run_koog("chat", "-s", "town", notes(place), env=local)
        assert done.returncode == 0, (place, done.stderr)
        assert done.stdout.strip(), (place, done.stderr)
    said = [m["content"] for m in json.loads(
        run_koog("history", "show", "-s", "town", "--json", env=local).stdout
    ) if m["role"] == "user"]  # fmt: skip
    assert said[-1] == notes(PLACES[-1])
    compressed = run_koog("compress", "-s", "town", "--json", env=local)
    assert compressed.returncode == 0, compressed.stderr
    assert json.loads(compressed.stdout)["changed"] is True
    off = tmp_path / "off.toml"
    off.write_text("[llm]\nmax_tokens = 24\n[compression]\nauto_at = 0\n")
    refused = run_koog(
        "chat", "-s", "town", notes("harbour") * 2, env={**local, "KOOG_CONFIG": str(off)}
    )
    assert refused.returncode == 1, refused.stderr
    assert "exceeds the available context size" in refused.stderr
    assert "koog compress -s town" in refused.stderr
    assert "koog rollback -s town --latest" in refused.stderr


def test_a_wrong_path_in_the_base_url_is_said(
    run_koog: Run, local: dict[str, str], llama: LlamaServer
) -> None:
    """Issue 52: a base URL without /v1's right path named gpt-4o-mini as not found."""
    wrong = {**local, "KOOG_MODEL": "", "OPENAI_BASE_URL": llama.base_url[:-3] + "/api/v1"}
    done = run_koog("chat", "--no-save", "hi", env=wrong)
    assert done.returncode == 1, done.stderr
    assert "nothing is served at that path" in done.stderr and "/v1" in done.stderr
    assert "/models answered HTTP 404, so koog found no model there" in done.stderr
    assert "gpt-4o-mini" not in done.stderr


def test_a_reply_cut_at_max_tokens_says_so(run_koog: Run, local: dict[str, str]) -> None:
    """Acceptance 3: `max_tokens = 3` on the real server: stderr says the reply was cut,
    `--json` has `"finish_reason": "length"`, and `--max-tokens` sets it for one call."""
    done = run_koog("chat", "--no-save", "--max-tokens", "3", "tell me a long story", env=local)
    assert done.returncode == 0, done.stderr
    assert "cut at max_tokens (3)" in done.stderr, done.stderr
    shown = run_koog("chat", "-s", "cut", "--json", "--max-tokens", "3", "a story", env=local)
    assert json.loads(shown.stdout)["finish_reason"] == "length", shown.stdout
    assert "cut at max_tokens (3)" in shown.stderr
    assert "cut at the length limit" in run_koog("history", "show", "-s", "cut", env=local).stdout


def test_the_second_turn_reads_the_first_from_the_prompt_cache(
    run_koog: Run, local: dict[str, str]
) -> None:
    """llama-server's prompt cache, as koog shows it (`-u`): the second turn of a session
    reads the first from the server's cache."""
    assert run_koog("chat", "-s", "cache", "-u", "Name a colour.", env=local).returncode == 0
    again = run_koog("chat", "-s", "cache", "-u", "Name another.", env=local)
    assert again.returncode == 0 and "prompt cache" in again.stderr, again.stderr


def test_koog_serve_speaks_every_protocol_to_it(
    llama: LlamaServer, koog_env: dict[str, str], local: dict[str, str]
) -> None:
    """Chat completions, the Responses API and Anthropic Messages through koog serve, to
    the real llama-server upstream (chat completions), each a stored turn."""
    import anthropic
    import openai

    from tests.support.serving import KoogServe

    served = KoogServe(local).start()
    try:
        client = openai.OpenAI(base_url=served.url, api_key="unused")
        chat = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "Say hi."}],
            max_tokens=8,
            extra_headers={"X-Koog-Session": "p-chat"},
        )
        assert chat.choices[0].message.content
        answer = client.responses.create(
            model="m",
            input="Say hi.",
            max_output_tokens=16,
            extra_headers={"X-Koog-Session": "p-responses"},
        )
        assert answer.output_text
        claude = anthropic.Anthropic(base_url=served.url.removesuffix("/v1"), api_key="unused")
        said = claude.messages.create(
            model="m",
            max_tokens=8,
            messages=[{"role": "user", "content": "Say hi."}],
            extra_headers={"X-Koog-Session": "p-messages"},
        )
        assert said.content[0].type == "text" and said.content[0].text
    finally:
        assert served.stop() == 0
