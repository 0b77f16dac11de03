"""Tool-call identity against real endpoints' habits (SPEC §5.15, ENDPOINT_QUIRKS.md): under
every quirk profile of the test server and on both backends, rollbacks killed at random
points and run again undo each effect exactly once, `--latest` compensates and its redo is
refused only for calls that were really undone, resume runs no tool twice, and no request
the server receives names one tool-call id twice (the server answers 400 if one does)."""

from __future__ import annotations

import json
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import ID_PROFILES, FakeOpenAIServer
from tests.support.zygote import ForkedKoog, Zygote

pytestmark = pytest.mark.e2e

TOOLS = '''
import json, os, signal, time
def _log(*entry):
    with open(os.environ["TOOL_LOG"], "a") as f:
        f.write(json.dumps(list(entry)) + "\\n")
def create_user(name: str) -> str:
    """Create a user account."""
    _log("create_user", name)
    marker = os.environ.get("KILL_MARKER")
    if marker and name == os.environ.get("KILL_AT") and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getppid(), signal.SIGKILL)  # koog, which runs the tool in a child
        time.sleep(5)  # killed with koog before it returns: a call in doubt
    return f"created {name}"
def remove_user(name: str) -> str:
    _log("remove_user", name)
    time.sleep(float(os.environ.get("UNDO_SLEEP", "0")))
    return f"removed {name}"
'''


class Koog:
    """koog processes forked by the zygote, with their stderr kept."""

    def __init__(self, zygote: Zygote, env: dict[str, str], folder: Path) -> None:
        self.zygote, self.env, self.folder = zygote, env, folder

    def start(self, *args: str) -> ForkedKoog:
        return self.zygote.spawn(*args, env=self.env, stderr=self.folder / "stderr.txt")

    def __call__(self, *args: str) -> tuple[int, str]:
        proc = self.start(*args)
        code = proc.wait(timeout=60)
        return code, (self.folder / "stderr.txt").read_text()


@pytest.fixture
def koog(
    backend: str,
    zygote: Zygote,
    koog_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Koog:
    module = f"ids_tools_{uuid.uuid4().hex[:8]}"  # each test imports its own copy
    (tmp_path / f"{module}.py").write_text(TOOLS)
    config = tmp_path / "ids.toml"
    config.write_text(
        f'[[tools]]\ncallable = "{module}:create_user"\nrollback = "{module}:remove_user"\n'
    )
    env = {**koog_env, "KOOG_CONFIG": str(config), "TOOL_LOG": str(tmp_path / "tools.log")}
    for key in ("KOOG_CONFIG", "TOOL_LOG", "KOOG_DATABASE_URL", "KOOG_DATABASE_SCHEMA"):
        if key in env:
            monkeypatch.setenv(key, env[key])
    monkeypatch.chdir(tmp_path)
    return Koog(zygote, env, tmp_path)


def log(koog: Koog) -> list[list[str]]:
    path = Path(koog.env["TOOL_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def two_users_a_turn(body: dict[str, Any]) -> dict[str, Any]:
    """Each `make NAME` message gets two create_user calls in one answer, then a reply."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"content": "made them"}
    word = str(last["content"]).split()[-1]
    if not last["content"].startswith("make "):
        return {"content": f"echo: {last['content']}"}
    return {
        "tool_calls": [
            {"name": "create_user", "arguments": {"name": f"{word}1"}},
            {"name": "create_user", "arguments": {"name": f"{word}2"}},
        ]
    }


def one_user_a_turn(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"content": "made it"}
    if not str(last["content"]).startswith("create "):
        return {"content": f"echo: {last['content']}"}
    return {
        "tool_calls": [{"name": "create_user", "arguments": {"name": last["content"].split()[1]}}]
    }


def turns(koog: Koog, session: str, *texts: str) -> None:
    """Turns through koog's services and the real openai client (quicker than a process
    a turn); the tools run in this process."""
    from koogcli.core.names import SessionName
    from koogcli.services import compose
    from koogcli.services.turn import TurnRequest, run_turn

    ctx = compose.build(env=koog.env)
    for text in texts:
        run_turn(ctx, TurnRequest(SessionName(session), text))


def no_request_repeats_an_id(server: FakeOpenAIServer) -> None:
    for request in server.chat_requests:
        ids = [c["id"] for m in request["messages"] for c in m.get("tool_calls") or []]
        assert len(ids) == len(set(ids)) and all(ids), ids


def stored_ids(koog: Koog, session: str) -> list[str]:
    code, _ = koog("history", "export", "-s", session, "-o", str(koog.folder / "h.json"))
    assert code == 0
    doc = json.loads((koog.folder / "h.json").read_text())
    return [c["id"] for m in doc["messages"] for c in m.get("tool_calls") or []]


@pytest.mark.parametrize("profile", ID_PROFILES)
def test_killed_rollbacks_run_again_undo_each_effect_once(
    profile: str, koog: Koog, server: FakeOpenAIServer
) -> None:
    from koogcli.core.names import SessionName
    from koogcli.services import checkpoints, compose

    server.use_profile(profile)
    server.responder = two_users_a_turn
    rng = random.Random(f"{profile}-rollback")
    for trial in range(2):
        session = f"rb{trial}"
        turns(koog, session, "hello")
        ctx = compose.build(env=koog.env)
        base = checkpoints.create(ctx, SessionName(session), "base").id
        names = [f"t{trial}n{n}" for n in range(5)]
        turns(koog, session, *(f"make {n}" for n in names))
        made = sorted(f"{n}{k}" for n in names for k in (1, 2))
        assert sorted(e[1] for e in log(koog) if e[0] == "create_user") == made
        ids = stored_ids(koog, session)
        assert len(ids) == 10 and len(set(ids)) == 10, ids  # §5.15, whatever the server sent
        Path(koog.env["TOOL_LOG"]).unlink()
        koog.env["UNDO_SLEEP"] = "0.02"
        proc = koog.start("rollback", "-s", session, base, "--yes")
        # A random point: after 1-9 of the 10 compensations, or a random time from start.
        wanted = rng.randint(0, 9)
        delay = rng.uniform(0.0, 0.25)
        started = time.monotonic()
        while proc.poll() is None:
            undone = sum(1 for e in log(koog) if e[0] == "remove_user")
            if (undone >= wanted > 0) or (not wanted and time.monotonic() - started >= delay):
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
        proc.wait()
        code, said = koog("rollback", "-s", session, base, "--yes")
        assert code == 0, said
        removed = sorted(e[1] for e in log(koog) if e[0] == "remove_user")
        assert removed == made, (profile, trial, wanted, said)  # each exactly once
        restored = ctx.history.read(SessionName(session)).messages
        assert restored == list(ctx.checkpoints.get(SessionName(session), base).messages)
    no_request_repeats_an_id(server)


@pytest.mark.parametrize("profile", ID_PROFILES)
def test_latest_compensates_and_redo_is_refused_only_for_undone_calls(
    profile: str, koog: Koog, server: FakeOpenAIServer
) -> None:
    server.use_profile(profile)
    server.responder = one_user_a_turn
    turns(koog, "r", "create Alex")
    code, said = koog("checkpoint", "create", "-s", "r", "--label", "after-alex")
    assert code == 0, said
    turns(koog, "r", "create Dan", "create Eve")
    code, said = koog("rollback", "-s", "r", "after-alex", "--yes")
    assert code == 0, said
    assert "undone: create_user(Eve)" in said and "undone: create_user(Dan)" in said
    # Redoing that rollback would bring back Dan and Eve, whose effects are gone: refused,
    # naming them and only them (Alex was never undone, whatever ids the server reused).
    code, said = koog("rollback", "-s", "r", "--latest", "--yes")
    assert code == 2 and "create_user(Dan), create_user(Eve)" in said, said
    assert "Alex" not in said
    # A plain turn, then --latest undoes it: nothing refused, nothing to compensate.
    turns(koog, "r", "just talk")
    code, said = koog("rollback", "-s", "r", "--latest", "--yes")
    assert code == 0, said
    # A tool-calling turn, then --latest compensates it and says so (§5.6).
    turns(koog, "r", "create Fay")
    code, said = koog("rollback", "-s", "r", "--latest", "--yes")
    assert code == 0 and "undone: create_user(Fay)" in said, said
    turns(koog, "r", "create Gus")
    code, said = koog("rollback", "-s", "r", "--latest", "--yes", "--no-compensate")
    assert code == 0 and "left in place: create_user(Gus) (--no-compensate)" in said, said
    removed = [e[1] for e in log(koog) if e[0] == "remove_user"]
    assert removed == ["Eve", "Dan", "Fay"]
    no_request_repeats_an_id(server)


@pytest.mark.parametrize("profile", ID_PROFILES)
def test_resume_after_a_kill_in_a_tool_runs_no_tool_twice(
    profile: str, koog: Koog, server: FakeOpenAIServer
) -> None:
    server.use_profile(profile)
    server.responder = two_users_a_turn
    turns(koog, "k", "make first")  # ids the server will hand out again
    koog.env.update(KILL_MARKER=str(koog.folder / "killed"), KILL_AT="second2")
    code, _ = koog("chat", "-s", "k", "make second")
    assert code == -signal.SIGKILL
    code, said = koog("chat", "-s", "k", "--resume")
    assert code == 0, said
    created = [e[1] for e in log(koog) if e[0] == "create_user"]
    # second2 was killed with koog while it ran (it never returned): it runs again on
    # resume; second1, which returned, never ran again.
    assert created == ["first1", "first2", "second1", "second2", "second2"], created
    ids = stored_ids(koog, "k")
    assert len(ids) == 4 and len(set(ids)) == 4, ids
    no_request_repeats_an_id(server)


def test_a_history_stored_with_repeated_ids_is_sent_with_distinct_ones(
    koog: Koog, server: FakeOpenAIServer
) -> None:
    """Histories written before ids were koog's may name one id twice; a strict server
    refuses such a request, so the request carries distinct ones (results paired in order),
    and an import gives them distinct ones for good."""
    from koogcli.core.messages import Message, ToolCall, assistant, tool_result, user
    from koogcli.core.names import SessionName
    from koogcli.services import compose

    old = [
        user("make two"),
        assistant(None, [ToolCall("call_0", "create_user", '{"name": "A"}')]),
        tool_result("call_0", "create_user", "created A"),
        assistant(None, [ToolCall("call_0", "create_user", '{"name": "B"}')]),
        tool_result("call_0", "create_user", "created B"),
        Message(role="assistant", content="made A and B"),
    ]
    ctx = compose.build(env=koog.env)
    ctx.history.write(SessionName("old"), old, expected_revision=0)  # as an older koog did
    code, said = koog("chat", "-s", "old", "and now?")
    assert code == 0, said
    sent = server.chat_requests[-1]["messages"]
    pairs = [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"]
    calls = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert [p[0] for p in pairs] == calls and calls[0] == "call_0" and calls[1] != "call_0"
    assert [p[1] for p in pairs] == ["created A", "created B"]
    code, said = koog("history", "export", "-s", "old", "-o", str(koog.folder / "old.json"))
    assert code == 0, said
    code, said = koog("history", "import", "-s", "copy", str(koog.folder / "old.json"))
    assert code == 0, said
    ids = stored_ids(koog, "copy")
    assert len(ids) == 2 and len(set(ids)) == 2, ids
