"""End-to-end: the installed `koog` binary against the local test server."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import API_KEY, KOOG_BIN, snapshot
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.e2e
Run = Callable[..., subprocess.CompletedProcess[str]]


def contents(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] != "system"]


def test_sessions_remember_and_stay_isolated(run_koog: Run, server: FakeOpenAIServer) -> None:
    first = run_koog("chat", "-s", "a", "hello")
    assert (first.returncode, first.stdout) == (0, "echo: hello\n")
    second = run_koog("chat", "-s", "a", "and again")
    assert second.stdout == "echo: and again\n"
    assert contents(server.chat_requests[1]) == ["hello", "echo: hello", "and again"]
    run_koog("chat", "-s", "b", "fresh")
    assert contents(server.chat_requests[2]) == ["fresh"]


def test_pipelines_get_only_the_reply(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path, koog_env: dict[str, str]
) -> None:
    server.enqueue({"content": "# Title\n\n**bold** reply"})
    piped = run_koog("chat", "-s", "p", input="text from a pipe\n")
    assert piped.returncode == 0
    assert piped.stdout == "# Title\n\n**bold** reply\n"
    assert "\x1b" not in piped.stdout
    question = tmp_path / "q.txt"
    question.write_text("file body\n")
    with question.open() as handle:
        result = subprocess.run(
            [KOOG_BIN, "chat", "-s", "p", "q"],
            stdin=handle,
            capture_output=True,
            text=True,
            env=koog_env,
            timeout=30,
        )
    assert result.stdout == "echo: q\n\nfile body\n"
    as_json = run_koog("chat", "-s", "p", "json please", "--json")
    payload = json.loads(as_json.stdout)
    assert set(payload) == {"session", "reply", "model", "usage", "checkpoint", "finish_reason"}
    assert payload["reply"] == "echo: json please" and payload["session"] == "p"
    assert payload["usage"]["total_tokens"] > 0


@pytest.mark.parametrize(
    "fault, code, pattern",
    [
        (
            {"status": 500, "message": "overloaded"},
            1,
            r"(?m)answered HTTP 500: overloaded$",
        ),
        ({"delay": 3, "content": "too late"}, 1, r"did not answer within 0.5s"),
    ],
)
def test_failed_turn_leaves_the_session_file_byte_identical(
    run_koog: Run,
    server: FakeOpenAIServer,
    data_dir: Path,
    fault: dict[str, Any],
    code: int,
    pattern: str,
) -> None:
    run_koog("chat", "-s", "f", "before")
    path = data_dir / "sessions" / "f.json"
    before = path.read_bytes()
    server.enqueue(fault)
    result = run_koog("chat", "-s", "f", "during", env={"KOOG_TIMEOUT_SECONDS": "0.5"})
    assert result.returncode == code
    assert re.search(pattern, result.stderr), result.stderr
    assert len(result.stderr.splitlines()) <= 2 and "Traceback" not in result.stderr
    assert path.read_bytes() == before


def test_interrupt_mid_stream_exits_130_and_stores_nothing(
    koog_env: dict[str, str], server: FakeOpenAIServer, data_dir: Path, run_koog: Run
) -> None:
    run_koog("chat", "-s", "i", "before")
    path = data_dir / "sessions" / "i.json"
    before = path.read_bytes()
    server.enqueue({"chunks": ["slow "] * 50, "chunk_delay": 0.1})
    proc = subprocess.Popen(
        [KOOG_BIN, "chat", "-s", "i", "slow"],
        env=koog_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.read(5) == "slow "
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert "turn cancelled" in err and "Traceback" not in err
    assert path.read_bytes() == before


def test_four_processes_lose_no_turn(
    koog_env: dict[str, str], server: FakeOpenAIServer, data_dir: Path, run_koog: Run
) -> None:
    script = "; ".join(f"{KOOG_BIN} chat -s shared w$W-t{t} >/dev/null" for t in range(5))
    procs = [
        subprocess.Popen(
            ["bash", "-c", script], env={**koog_env, "W": str(w)}, stdin=subprocess.DEVNULL
        )
        for w in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    shown = run_koog("history", "show", "-s", "shared", "--format", "json")
    users = sorted(m["content"] for m in json.loads(shown.stdout) if m["role"] == "user")
    assert users == sorted(f"w{w}-t{t}" for w in range(4) for t in range(5))


@pytest.mark.parametrize(
    "name", ["../x", "/etc/passwd", "a/b", "", "x" * 65, "bad\x01name", ".hidden"]
)
def test_invalid_session_names_touch_nothing(run_koog: Run, isolated: Path, name: str) -> None:
    before = snapshot(isolated)
    for args in (
        ("chat", "-s", name, "hi"),
        ("history", "show", "-s", name),
        ("history", "clear", "-s", name, "--yes"),
    ):
        result = run_koog(*args)
        assert result.returncode == 2, result.stderr
        assert "invalid session name" in result.stderr
    assert snapshot(isolated) == before
    assert not (isolated / "data").exists()


def test_corrupt_session_file_is_exit_3_and_left_alone(run_koog: Run, data_dir: Path) -> None:
    run_koog("chat", "-s", "g", "hi")
    path = data_dir / "sessions" / "g.json"
    path.write_bytes(b"\x00garbage{{{")
    for args in (("chat", "-s", "g", "more"), ("history", "show", "-s", "g")):
        result = run_koog(*args)
        assert result.returncode == 3
        assert str(path) in result.stderr and "Traceback" not in result.stderr
    assert path.read_bytes() == b"\x00garbage{{{"


def test_bad_config_is_exit_2_naming_line_and_key(run_koog: Run, tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[llm]\nmodel = "m"\nmodel = "twice"\n')
    result = run_koog("--config", str(cfg), "chat", "x")
    assert result.returncode == 2 and "line 3" in result.stderr
    cfg.write_text('[llm]\nmodle = "m"\n')
    result = run_koog("--config", str(cfg), "chat", "x")
    assert result.returncode == 2
    assert "unknown key 'llm.modle'" in result.stderr and "did you mean 'model'" in result.stderr


def test_no_file_holds_the_key_and_all_are_private(run_koog: Run, data_dir: Path) -> None:
    for session in ("k1", "k2"):
        assert run_koog("chat", "-s", session, f"my key is not {API_KEY[:3]}").returncode == 0
    run_koog("history", "clear", "-s", "k1", "--yes")
    found = list(data_dir.rglob("*"))
    assert any(p.name == "k2.json" for p in found)
    for path in found:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, path
        else:
            assert mode == 0o600, path
            assert API_KEY.encode() not in path.read_bytes(), path


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_first_run_guide_without_endpoint(run_koog: Run, tmp_path: Path) -> None:
    import tomllib

    nobody = f"http://127.0.0.1:{closed_port()}/v1"
    env = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "KOOG_LOCAL_SERVERS": nobody}
    result = run_koog("chat", "hi", env=env)
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stderr and "OPENAI_BASE_URL" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    pasted = result.stderr.split("[llm]", 1)[1].split("\n\n", 1)[0]
    config = tomllib.loads("[llm]" + pasted)  # the guide's TOML works when pasted
    assert set(config["llm"]) == {"base_url", "model", "api_key_env"}
    assert "koog config init" in result.stderr


def test_a_local_server_is_found_when_nothing_is_configured(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    nobody = f"http://127.0.0.1:{closed_port()}/v1"
    env = {
        "OPENAI_BASE_URL": "",
        "OPENAI_API_KEY": "",
        "KOOG_MODEL": "",
        "KOOG_LOCAL_SERVERS": f"{nobody},{server.base_url}",
    }
    result = run_koog("chat", "-s", "local", "hi", env=env)
    assert result.returncode == 0 and result.stdout == "echo: hi\n"
    assert f"using the local server at {server.base_url} (model test-model)" in result.stderr
    assert server.chat_requests[-1]["model"] == "test-model"


def test_a_local_base_url_without_a_model_uses_the_servers_first(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The README's first run (`export OPENAI_BASE_URL=http://127.0.0.1:11434/v1; koog
    chat`) must not send gpt-4o-mini, which a local server does not have."""
    result = run_koog("chat", "-s", "first", "hi", env={"KOOG_MODEL": ""})
    assert result.returncode == 0 and result.stdout == "echo: hi\n"
    [line] = result.stderr.splitlines()
    assert line.startswith(f"using model test-model, the first that {server.base_url} lists")
    assert server.chat_requests[-1]["model"] == "test-model"
    # Said once: a pipeline's later one-shots on the same server and model stay quiet.
    again = run_koog("chat", "-s", "first", "and again", env={"KOOG_MODEL": ""})
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert server.chat_requests[-1]["model"] == "test-model"
    tokens = run_koog("history", "show", "-s", "first", "--tokens", env={"KOOG_MODEL": ""})
    assert "for test-model" in tokens.stdout  # the model the session's replies came from
    # A model that is configured is sent as it is, and nothing is said.
    named = run_koog("chat", "-s", "first", "again", env={"KOOG_MODEL": "my-model"})
    assert named.returncode == 0 and named.stderr == ""
    assert server.chat_requests[-1]["model"] == "my-model"
    # `config show` prints the model turns use, and where it came from.
    shown = run_koog("config", "show", env={"KOOG_MODEL": ""})
    assert 'model = "test-model"' in shown.stdout, shown.stdout
    assert f"# llm.model <- the first model {server.base_url} lists" in shown.stdout
    listed = run_koog("config", "show", "--json", env={"KOOG_MODEL": "my-model"})
    assert '"model": "my-model"' in listed.stdout


def test_config_init_leaves_every_default_to_the_defaults(run_koog: Run, tmp_path: Path) -> None:
    path = tmp_path / "fresh.toml"
    assert run_koog("--config", str(path), "config", "init").returncode == 0
    shown = json.loads(run_koog("config", "show", "--json", "--config", str(path)).stdout)
    assert not [where for where in shown["sources"].values() if str(path) in where]
    assert shown["settings"]["llm"]["model"] == "gpt-4o-mini"


MODEL_NOT_FOUND = {
    "status": 404,
    "message": "The model `gpt-4o-mini` does not exist or you do not have access to it.",
    "code": "model_not_found",
}


@pytest.mark.parametrize(
    "answer, needle",
    [
        ({"status": 401}, "OPENAI_API_KEY"),
        (MODEL_NOT_FOUND, "model 'gpt-4o-mini'"),
        ({"status": 404, "message": "File Not Found"}, "nothing is served at that path"),
    ],
    ids=["401", "404-model", "404-path"],
)
def test_api_errors_name_what_to_check(
    run_koog: Run, server: FakeOpenAIServer, answer: dict[str, object], needle: str
) -> None:
    server.enqueue(answer)
    result = run_koog("chat", "hi")
    assert result.returncode == 1 and needle in result.stderr
    assert API_KEY not in result.stderr


def test_connection_refused_names_the_url(run_koog: Run) -> None:
    url = "http://127.0.0.1:9/v1"
    result = run_koog("chat", "hi", env={"OPENAI_BASE_URL": url})
    assert result.returncode == 1
    assert f"cannot connect to {url}" in result.stderr


def test_startup_paths_do_not_import_heavy_modules(koog_env: dict[str, str], run_koog: Run) -> None:
    """pydantic alone takes about 0.15 s to import: listings and short reads go without it."""
    run_koog("chat", "-s", "imp", "x")
    for args in (
        ["--help"],
        ["history", "show", "-s", "imp"],
        ["history", "list"],
        ["history", "show", "-s", "imp", "--last", "1"],
        ["checkpoint", "list", "-s", "imp"],
    ):
        result = subprocess.run(
            [
                os.path.join(os.path.dirname(KOOG_BIN), "python"),
                "-X",
                "importtime",
                "-m",
                "koogcli",
                *args,
            ],
            capture_output=True,
            text=True,
            env=koog_env,
            timeout=30,
        )
        assert result.returncode == 0, result.stderr[-500:]
        imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()}
        for heavy in ("openai", "prompt_toolkit", "rich.markdown", "httpx", "pydantic"):
            assert heavy not in imported, (args, heavy)


def test_a_new_sessions_name_is_on_stderr_even_in_a_pipe(run_koog: Run) -> None:
    """README: `koog chat "what is a monad"` starts a new session, its name on stderr."""
    done = run_koog("chat", "what is a monad")
    assert done.returncode == 0 and done.stdout == "echo: what is a monad\n"
    [line] = done.stderr.splitlines()
    name = line.removeprefix("koog: ").removeprefix("session ")
    listed = json.loads(run_koog("history", "list", "--json").stdout)
    assert [s["session"] for s in listed] == [name]


def test_a_one_line_json_lines_file_imports(run_koog: Run, tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"role": "user", "content": "just one message"}) + "\n")
    done = run_koog("history", "import", "-s", "single", str(one))
    assert done.returncode == 0, done.stderr
    shown = json.loads(run_koog("history", "show", "-s", "single", "--json").stdout)
    assert [m["content"] for m in shown if m["role"] != "system"] == ["just one message"]


def test_a_streamed_one_shot_turn_does_not_import_the_openai_sdk(
    koog_env: dict[str, str],
) -> None:
    """The SDK's import is 0.3 s of a one-shot turn: a streamed turn goes without it
    (adapters/model/chat_upstream.py), and still answers, stores and reports usage."""
    result = subprocess.run(
        [os.path.join(os.path.dirname(KOOG_BIN), "python"), "-X", "importtime", "-m", "koogcli",
         "chat", "-s", "lean", "hi", "-u"],
        capture_output=True,
        text=True,
        env=koog_env,
        timeout=30,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout == "echo: hi\n", result.stderr[-500:]
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()}
    assert "openai" not in imported
    assert "tokens" in result.stderr  # -u: the usage the stream reported
