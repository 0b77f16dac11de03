"""`koog serve` driven by real third-party clients, installed from PyPI in the test run
(issue 30; SPEC §6 "Placement"): llm (the CLI), langchain-openai, openai-agents, litellm and
pydantic-ai, each in one process of its own (tests/clients/) from one virtual environment
of theirs, against a real `koog serve` (each client on one backend, alternating), its upstream
the local test server.

Every client is configured as its docs say, with one fixed `X-Koog-Session` header that it
never changes (none reads the reply's `X-Koog-Session` back). For each:
- a conversation of several turns is exactly one session holding exactly its turns, each
  message once, in order;
- a second, different conversation under the same header afterwards lands in exactly one
  fork `NAME~2` that all its later turns continue, and `NAME` still holds only the first;
- `koog history list --json` names the fork's parent (`forked_from`);
- tool-calling clients do not fork: llm (`--functions`) and LangChain (`bind_tools`) send
  the upstream's arguments back re-serialised (`{"c": "O"}` for `{"c":"O"}`), the Agents
  SDK sends them as it got them; the test checks which each one sent.

The clients talk to koog through a relay in this process that passes every byte on as it
comes (streams included) and records each request and the session koog answered in. The
clients' environment is built once per set of pins under the user's cache folder
(`$XDG_CACHE_HOME` or `~/.cache`, `koog-test-clients/<hash>`; a marker written last says it
is complete), so only the first run pays for the install (about 1.5 minutes). At test time
the clients reach only loopback: their proxy is a local listener that refuses and records
every attempt, and each client's telemetry, tracing and remote lookups are switched off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.relay import relaying
from tests.support.serving import KoogServe, http

# The install is not a test's time: the first test on each worker waits for it (one worker
# installs, the other waits on the lock), so these tests get a timeout that covers one;
# every client process has its own timeout (CLIENT_TIMEOUT).
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

Run = Callable[..., subprocess.CompletedProcess[str]]

# The versions issue 30 was found with; they install together into one environment.
PINS = (
    "llm==0.36",
    "langchain-openai==1.7.4",
    "openai-agents==0.24.0",
    "litellm==1.110.2",
    "pydantic-ai-slim[openai]==2.68.0",
    "openai==3.57.0",
)
CLIENTS_DIR = Path(__file__).resolve().parent.parent / "clients"
# Read at import, before the tests' isolation moves HOME into a temp folder.
HOME = pwd.getpwuid(os.getuid()).pw_dir
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path(HOME) / ".cache") / "koog-test-clients"
CLIENT_TIMEOUT = 180
ELEMENTS = {"O": "oxygen", "Fe": "iron"}


# --- the clients' virtual environment -------------------------------------------------


def _venv_key() -> str:
    recipe = json.dumps([sys.version_info[:2], sys.base_prefix, PINS])
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


@pytest.fixture(scope="session")
def client_python() -> Path:
    """The Python of the clients' environment: made once per set of pins (under a lock, as
    both test workers want it), reused while its marker says it is complete; environments
    of other pins are removed when a new one is made. An install that fails (PyPI out of
    reach) skips these tests, with the reason, outside CI; under CI it is a failure."""
    folder = CACHE / _venv_key()
    marker = folder / "complete"
    python = folder / "bin" / "python"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return python
        for old in CACHE.iterdir():  # other pins' environments, or a half-made one
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        done = subprocess.run(
            [*pip, *PINS],
            capture_output=True,
            text=True,
            timeout=840,
            env={**os.environ, "HOME": HOME},  # pip's own cache is the user's
        )
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            why = f"installing {' '.join(PINS)} failed:\n{done.stderr[-4000:]}"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        marker.write_text(
            json.dumps({"pins": PINS, "seconds": round(time.monotonic() - started, 1)})
        )
        return python


# --- no internet for the clients -------------------------------------------------------


@pytest.fixture
def outside() -> Iterator[tuple[str, list[str]]]:
    """A proxy on loopback that forwards nothing: every request a client tries to send
    off this machine (through the proxy settings all these clients honour) is refused and
    its first line recorded. Yields the proxy URL and the record."""
    attempts: list[str] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    attempts.append(conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", attempts
    stop.set()
    thread.join(5)
    listener.close()


def _client_env(proxy: str, base_url: str, tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KOOG_", "OPENAI_", "PYTHON")) and not k.lower().endswith("_proxy")
    }
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = proxy
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    env.update(
        # Whatever a client would send to OpenAI by default goes to koog serve instead.
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="unused",
        # litellm: its bundled model cost map, not the one on GitHub; no telemetry.
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
        # openai-agents: no trace export (the script also calls set_tracing_disabled).
        OPENAI_AGENTS_DISABLE_TRACING="1",
        OPENAI_AGENTS_DONT_LOG_MODEL_DATA="1",
        # LangChain: no LangSmith tracing.
        LANGCHAIN_TRACING_V2="false",
        LANGSMITH_TRACING="false",
        # Anything that looks at a model hub or reports usage.
        HF_HUB_OFFLINE="1",
        DO_NOT_TRACK="1",
        TMPDIR=str(tmp_path),
    )
    return env


@pytest.fixture
def relay(serve: KoogServe) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The base URL the clients are given (koog serve's, through the relay) and the record
    of what they sent."""
    with relaying(serve.url) as (url, seen):
        yield url, seen


# --- the upstream's script ---------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _upstream(body: dict[str, Any]) -> dict[str, Any]:
    """What the test server answers (its queue left empty), whatever the order of the
    requests: "element SYMBOL" with tools offered → a call of the first tool with the
    arguments compact as real servers send them (`{"c":"O"}`); after a tool result →
    "result: RESULT"; anything else → "echo: LAST USER MESSAGE"."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"content": f"result: {_text(last.get('content')).strip()}"}
    said = next(
        (_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    asked = re.fullmatch(r"element (\w+)", said.strip())
    if asked and body.get("tools"):
        name = body["tools"][0]["function"]["name"]
        arguments = json.dumps({"c": asked.group(1)}, separators=(",", ":"))
        return {"tool_calls": [{"name": name, "arguments": arguments}], "content": ""}
    return {"content": f"echo: {said}"}


# --- what each client does and what koog must have stored ----------------------------


def _turns(*words: str) -> list[tuple[Any, ...]]:
    return [m for w in words for m in (("user", w), ("assistant", f"echo: {w}"))]


def _tool_turn(symbol: str) -> list[tuple[Any, ...]]:
    return [
        ("user", f"element {symbol}"),
        ("assistant", "", ("element", {"c": symbol})),
        ("tool", ELEMENTS[symbol]),
        ("assistant", f"result: {ELEMENTS[symbol]}"),
    ]


@dataclass(frozen=True)
class Client:
    script: str
    sessions: tuple[str, ...]  # the script's arguments after the base URL: its headers
    # Each family (a header's NAME) → its members → their messages (system ones left out).
    stored: dict[str, dict[str, list[tuple[Any, ...]]]]
    # The session koog answers each chat request in (the reply's X-Koog-Session), in order.
    answered: list[str]
    replies: list[str]  # what the client got back, in order
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    # How the client sends the upstream's `{"c":"O"}` back: re-serialised or as it came.
    sent_arguments: str | None = None


TOOLS_TWICE = [*_tool_turn("O"), *_tool_turn("Fe")]
TOOL_RUNS = [{"c": "O"}, {"c": "Fe"}]
CLIENTS = {
    "llm": Client(
        "llm_client.py",
        ("llmwork", "llmtools"),
        {
            "llmwork": {
                "llmwork": _turns("one", "two"),
                "llmwork~2": _turns("three", "four", "five"),
            },
            "llmtools": {"llmtools": TOOLS_TWICE},
        },
        ["llmwork"] * 2 + ["llmwork~2"] * 3 + ["llmtools"] * 4,
        [f"echo: {w}" for w in ("one", "two", "three", "four", "five")]
        + ["result: oxygen", "result: iron"],
        TOOL_RUNS,
        '{"c": "O"}',
    ),
    "langchain": Client(
        "langchain_client.py",
        ("lcchat", "lctools"),
        {
            "lcchat": {
                "lcchat": _turns("one", "two", "three"),
                "lcchat~2": _turns("other", "more", "last"),
            },
            "lctools": {"lctools": TOOLS_TWICE},
        },
        ["lcchat"] * 3 + ["lcchat~2"] * 3 + ["lctools"] * 4,
        [f"echo: {w}" for w in ("one", "two", "three", "other", "more", "last")]
        + ["result: oxygen", "result: iron"],
        TOOL_RUNS,
        '{"c": "O"}',
    ),
    "openai-agents": Client(
        "agents_client.py",
        ("agents",),
        {"agents": {"agents": TOOLS_TWICE, "agents~2": _turns("other", "more")}},
        ["agents"] * 4 + ["agents~2"] * 2,
        ["result: oxygen", "result: iron", "echo: other", "echo: more"],
        TOOL_RUNS,
        '{"c":"O"}',
    ),
    "litellm": Client(
        "litellm_client.py",
        ("litellm",),
        {
            "litellm": {
                "litellm": _turns("one", "two", "three"),
                "litellm~2": _turns("other", "more"),
            }
        },
        ["litellm"] * 3 + ["litellm~2"] * 2,
        [f"echo: {w}" for w in ("one", "two", "three", "other", "more")],
    ),
    "pydantic-ai": Client(
        "pydantic_ai_client.py",
        ("pai",),
        {"pai": {"pai": _turns("one", "two", "three"), "pai~2": _turns("other", "more")}},
        ["pai"] * 3 + ["pai~2"] * 2,
        [f"echo: {w}" for w in ("one", "two", "three", "other", "more")],
    ),
}


def _said(message: dict[str, Any]) -> tuple[Any, ...]:
    """A stored message as compared: role, text, and each tool call's name and parsed
    arguments (ids are koog's)."""
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
        for c in message.get("tool_calls") or []
    ]
    return (message["role"], _text(message.get("content")).strip(), *calls)


def _family(sessions: list[str], family: str) -> list[str]:
    members = [s for s in sessions if re.fullmatch(re.escape(family) + r"(~\d+)?", s)]
    return sorted(members, key=lambda n: int(n.partition("~")[2] or 1))


def _sent_arguments(seen: list[dict[str, Any]]) -> set[str]:
    """Every `arguments` string the client sent back for the call element(c="O")."""
    return {
        call["function"]["arguments"]
        for request in seen
        for message in (request["body"] or {}).get("messages", [])
        for call in message.get("tool_calls") or []
        if json.loads(call["function"]["arguments"]) == {"c": "O"}
    }


# Each client on one backend, the backends alternating (what is stored is the serve
# tests' on both backends; here each client's wire and placement, once).
ON_BACKENDS = [(name, ("files", "postgresql")[i % 2]) for i, name in enumerate(CLIENTS)]


@pytest.mark.parametrize(("name", "backend"), ON_BACKENDS, indirect=["backend"])
def test_a_real_client_keeps_one_session_per_conversation(
    name: str,
    client_python: Path,
    serve: KoogServe,
    server: FakeOpenAIServer,
    relay: tuple[str, list[dict[str, Any]]],
    outside: tuple[str, list[str]],
    run_koog: Run,
    tmp_path: Path,
) -> None:
    client = CLIENTS[name]
    server.responder = _upstream
    base_url, seen = relay
    proxy, attempts = outside
    done = subprocess.run(
        [str(client_python), str(CLIENTS_DIR / client.script), base_url, *client.sessions],
        capture_output=True,
        text=True,
        env=_client_env(proxy, base_url, tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=CLIENT_TIMEOUT,
    )
    assert done.returncode == 0, f"{client.script} exited {done.returncode}:\n{done.stderr[-6000:]}"
    ran = json.loads(done.stdout.strip().splitlines()[-1])

    # The mechanics: the client got every reply through koog serve and ran its tool, sent
    # nothing but its chat requests, each with its header, and nothing off this machine.
    assert [r.strip() for r in ran["replies"]] == client.replies
    assert ran["tool_calls"] == client.tool_calls
    assert attempts == [], f"{name} tried to reach outside this machine: {attempts}"
    assert [r["path"] for r in seen] == ["/v1/chat/completions"] * len(client.answered)
    assert all(r["status"] == 200 for r in seen), [r["status"] for r in seen]
    families = [r["headers"].get("x-koog-session") for r in seen]
    assert families == [a.partition("~")[0] for a in client.answered]
    if client.sent_arguments is not None:
        assert _sent_arguments(seen) == {client.sent_arguments}
    assert len(server.chat_requests) == len(client.answered)  # no retries, no side requests

    # What issue 30 asks, each item checked and every miss reported at once.
    problems: list[str] = []
    answered = [r["answered"] for r in seen]
    if answered != client.answered:
        problems.append(f"answered in {answered}, not {client.answered}")
    base = serve.url.removesuffix("/v1")
    status, listed = http("GET", f"{base}/koog/v1/sessions")
    assert status == 200, listed
    names = [s["session"] for s in listed]
    wanted_names = [m for members in client.stored.values() for m in members]
    if sorted(names) != sorted(wanted_names):
        problems.append(f"sessions {sorted(names)}, not {sorted(wanted_names)}")
    for family, members in client.stored.items():
        for member in _family(names, family):
            status, shown = http("GET", f"{base}/koog/v1/sessions/{member}")
            assert status == 200, (member, shown)
            messages = [m for m in shown["messages"] if m["role"] != "system"]
            got = [_said(m) for m in messages]
            if got != members.get(member):
                problems.append(f"{member} holds {got}, not {members.get(member)}")
            # Each tool result answers the call just before it.
            for before, after in itertools.pairwise(messages):
                calls = [c["id"] for c in before.get("tool_calls") or []]
                if after["role"] == "tool" and after.get("tool_call_id") not in calls:
                    problems.append(f"{member}: tool result {after} answers none of {calls}")
    history = run_koog("history", "list", "--json")
    assert history.returncode == 0, history.stderr
    lineage = {s["session"]: s["forked_from"] for s in json.loads(history.stdout)}
    for family, members in client.stored.items():
        for member in members:
            origin = lineage.get(member)
            parent = None if member == family else family
            if (origin or {}).get("session") != parent:
                problems.append(f"history list: {member} forked_from {origin}, not {parent}")
    assert not problems, "\n".join(problems)
