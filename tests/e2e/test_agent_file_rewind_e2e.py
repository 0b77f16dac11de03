"""Rewind from the wire (issue 47): `koog rollback` of a coding agent's session sets back
the files its edit tools changed, with the conversation. The real Claude Code through
koog serve, the test server as its upstream; the files are the agent's own work folder."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_serve_agents_e2e import ClaudeCode, _run, _started
from tests.e2e.test_serve_agents_e2e import agents as agents  # the fixture
from tests.fakes.openai_server import FakeOpenAIServer, text_of

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
Run = Callable[..., subprocess.CompletedProcess[str]]
ALLOWED = ["--allowedTools", "Read,Write,Edit", "--output-format", "json"]


def _calls(name: str, ident: str, arguments: dict[str, object]) -> dict[str, object]:
    return {"tool_calls": [{"id": ident, "name": name, "arguments": json.dumps(arguments)}]}


def _two_turns(
    agents: Path, koog_env: dict[str, str], server: FakeOpenAIServer, tmp_path: Path
) -> tuple[Path, Path]:
    """Turn 1 writes notes.txt ("version one"); turn 2 reads and edits it ("version two")."""
    agent = ClaudeCode()
    served, home, work = _started(koog_env, tmp_path)
    notes = work / "notes.txt"
    claude = str(agents / "claude")
    server.enqueue(
        _calls("Write", "toolu_w", {"file_path": str(notes), "content": "version one\n"}),
        {"content": "Wrote it."},
    )
    try:
        _run(agent, [claude, "-p", "write notes.txt", *ALLOWED], home, work, served.url)
        assert notes.read_text() == "version one\n"
        edit = {"file_path": str(notes), "old_string": "one", "new_string": "two"}
        server.enqueue(
            _calls("Read", "toolu_r", {"file_path": str(notes)}),
            _calls("Edit", "toolu_e", edit),
            {"content": "Changed it."},
        )
        again = [claude, "-p", "make it version two", "--continue", *ALLOWED]
        _run(agent, again, home, work, served.url)
        assert notes.read_text() == "version two\n"
    finally:
        assert served.stop() == 0
    return notes, tmp_path / "serve.log"


def _session(run_koog: Run) -> str:
    [session] = [s["session"] for s in json.loads(run_koog("history", "list", "--json").stdout)]
    return str(session)


def _said(run_koog: Run, session: str) -> list[str]:
    shown = run_koog("history", "show", "-s", session, "--json")
    return [text_of(m.get("content")) for m in json.loads(shown.stdout) if m["role"] == "user"]


def test_rollback_takes_the_agents_edits_back_turn_by_turn(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """Acceptance 1: rollback --latest → "version one"; back past turn 1 → the file is
    gone; the history at each step matches."""
    notes, _ = _two_turns(agents, koog_env, server, tmp_path)
    session = _session(run_koog)
    assert any("make it version two" in s for s in _said(run_koog, session))
    why = run_koog("history", "show", "-s", session)
    assert "edited notes.txt (+1 \u22121)" in why.stdout, why.stdout
    listed = run_koog("checkpoint", "list", "-s", session, "--json")
    assert any(str(notes) in p.get("files", []) for p in json.loads(listed.stdout))
    first = run_koog("rollback", "-s", session, "--latest", "--yes", "--json")
    assert first.returncode == 0, first.stderr
    assert notes.read_text() == "version one\n"
    report = json.loads(first.stdout)
    assert [(f["path"], f["status"]) for f in report["files"]] == [(str(notes), "restored")]
    said = _said(run_koog, session)
    assert not any("make it version two" in s for s in said) and any(
        "write notes.txt" in s for s in said
    ), said
    # Undoing that rollback (SPEC §5.11: --latest undoes the last change, the rollback
    # itself) sets the file forward again, with the turn.
    undone = run_koog("rollback", "-s", session, "--latest", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert notes.read_text() == "version two\n", undone.stderr
    assert any("make it version two" in s for s in _said(run_koog, session))
    # Back past turn 1: the restore point before it; the file turn 1 made is gone.
    points = json.loads(run_koog("checkpoint", "list", "-s", session, "--json").stdout)
    turns = [p for p in points if p["reason"] == "turn"]
    assert len(turns) == 2, points  # one per prompt: the agent's tool results continue it
    second = run_koog("rollback", turns[-1]["id"], "-s", session, "--yes")
    assert second.returncode == 0, second.stderr
    assert not notes.exists()
    assert f"removed: {notes}" in second.stderr, second.stderr
    assert not any("write notes.txt" in s for s in _said(run_koog, session))


def _scripted(replies: list[dict[str, object]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The replies in order to the requests that offer tools; a side request (opencode's
    title) gets a title and takes none of them."""
    left = list(replies)

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("tools") and left:
            return dict(left.pop(0))
        return {"content": "Notes"}

    return answer


def _patch(body: str) -> dict[str, object]:
    """Codex edits with its apply_patch, which it runs when the model calls its shell."""
    command = f"apply_patch <<'EOF'\n*** Begin Patch\n{body}\n*** End Patch\nEOF\n"
    return {"cmd": command}


def _codex_turns(work: Path) -> list[tuple[list[dict[str, object]], str]]:
    notes = "*** Add File: notes.txt\n+version one"
    edit = "*** Update File: notes.txt\n@@\n-version one\n+version two"
    return [
        ([_calls("exec_command", "call_w", _patch(notes)), {"content": "Wrote it."}],
         "write notes.txt"),
        ([_calls("exec_command", "call_e", _patch(edit)), {"content": "Changed it."}],
         "make it version two"),
    ]  # fmt: skip


def _opencode_turns(work: Path) -> list[tuple[list[dict[str, object]], str]]:
    notes = str(work / "notes.txt")
    edit = {"filePath": notes, "oldString": "one", "newString": "two"}
    return [
        ([_calls("write", "call_w", {"filePath": notes, "content": "version one\n"}),
          {"content": "Wrote it."}], "write notes.txt"),
        ([_calls("read", "call_r", {"filePath": notes}), _calls("edit", "call_e", edit),
          {"content": "Changed it."}], "make it version two"),
    ]  # fmt: skip


@pytest.mark.parametrize("which", ["codex", "opencode"])
def test_codex_and_opencode_edits_are_rolled_back_too(
    which: str,
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """Codex's apply_patch and opencode's write / edit, journalled and set back."""
    from tests.e2e.test_serve_agents_e2e import Codex, Opencode

    agent = Codex() if which == "codex" else Opencode("@ai-sdk/openai-compatible")
    served, home, work = _started(koog_env, tmp_path)
    notes = work / "notes.txt"
    turns = (_codex_turns if which == "codex" else _opencode_turns)(work)
    try:
        agent.setup(home, served.url)  # type: ignore[attr-defined]
        for number, (replies, prompt) in enumerate(turns):
            server.responder = _scripted(replies)
            command = (
                agent.first(agents, home, served.url)
                if number == 0
                else (agent.again(agents, home, served.url))
            )
            command = [*command[:-1], prompt]
            if which == "codex":
                command.insert(2, "--dangerously-bypass-approvals-and-sandbox")
            _run(agent, command, home, work, served.url)
        assert notes.read_text() == "version two\n"
    finally:
        assert served.stop() == 0
    session = _session(run_koog)
    first = run_koog("rollback", "-s", session, "--latest", "--yes")
    assert first.returncode == 0, first.stderr
    assert notes.read_text() == "version one\n", first.stderr
    points = json.loads(run_koog("checkpoint", "list", "-s", session, "--json").stdout)
    before_first = [p for p in points if p["reason"] == "turn"][-1]
    second = run_koog("rollback", before_first["id"], "-s", session, "--yes")
    assert second.returncode == 0, second.stderr
    assert not notes.exists(), second.stderr


NAMES = [f"file{n}.txt" for n in range(5)]


def _five_files(
    agents: Path, koog_env: dict[str, str], server: FakeOpenAIServer, tmp_path: Path
) -> list[Path]:
    """Claude Code writes five files ("one"), then reads and edits each ("two")."""
    agent = ClaudeCode()
    served, home, work = _started(koog_env, tmp_path)
    files = [work / name for name in NAMES]
    claude = str(agents / "claude")

    def each(tool: str, make: Callable[[Path], dict[str, object]]) -> dict[str, object]:
        calls = [
            {"id": f"toolu_{tool}{n}", "name": tool, "arguments": json.dumps(make(path))}
            for n, path in enumerate(files)
        ]
        return {"tool_calls": calls}

    try:
        server.enqueue(
            each("Write", lambda p: {"file_path": str(p), "content": f"{p.name}: one\n"}),
            {"content": "Wrote five."},
        )
        _run(agent, [claude, "-p", "write five files", *ALLOWED], home, work, served.url)
        server.enqueue(
            each("Read", lambda p: {"file_path": str(p)}),
            each("Edit", lambda p: {"file_path": str(p), "old_string": "one", "new_string": "two"}),
            {"content": "Edited five."},
        )
        again = [claude, "-p", "make them two", "--continue", *ALLOWED]
        _run(agent, again, home, work, served.url)
    finally:
        assert served.stop() == 0
    assert [f.read_text() for f in files] == [f"{n}: two\n" for n in NAMES]
    return files


def test_a_rollback_killed_at_any_instant_restores_each_file_exactly_once(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    zygote: Any,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    """Acceptance 3: koog killed during a rollback over five edited files (as the restores
    are journalled, after the k-th file, at a random moment), then the rollback run again:
    each file restored exactly once (a file restored before the kill is not written
    again: the same inode), the end state as without the kill."""
    import random
    import shutil
    import signal
    import time

    files = _five_files(agents, koog_env, server, tmp_path)
    session = _session(run_koog)
    points = json.loads(run_koog("checkpoint", "list", "-s", session, "--json").stdout)
    target = points[0]["id"]  # before turn 2
    pristine = tmp_path / "pristine-data"
    shutil.copytree(data_dir, pristine)
    journal = data_dir / "edits" / "sessions" / f"{session}.jsonl"
    rng = random.Random(47)
    interrupted = partly = 0
    for trial in range(15):
        shutil.rmtree(data_dir)
        shutil.copytree(pristine, data_dir)
        for path in files:
            path.write_text(f"{path.name}: two\n")
        size = journal.stat().st_size
        mode, k = trial % 3, trial % 5 + 1

        def restores(status: str, size: int = size) -> int:
            tail = journal.read_bytes()[size:].decode(errors="replace")
            return tail.count(f'"status": "{status}"')

        if mode == 0:
            ready: Callable[[], bool] = lambda: restores("pending") >= 5  # noqa: E731
        elif mode == 1:
            ready = lambda k=k: restores("done") >= k  # type: ignore[misc]  # noqa: E731
        else:
            at = time.monotonic() + rng.uniform(0.0, 0.4)
            ready = lambda at=at: time.monotonic() >= at  # type: ignore[misc]  # noqa: E731
        proc = zygote.spawn("rollback", "-s", session, target, "--yes", env=koog_env)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline and not ready():
            time.sleep(0.0002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        done_at_kill = {
            p.name: p.stat().st_ino for p in files if p.read_text() == f"{p.name}: one\n"
        }
        interrupted += len(done_at_kill) < len(files)  # the kill left files to restore
        again = run_koog("rollback", "-s", session, target, "--yes", "--json")
        assert again.returncode == 0, (trial, again.stderr)
        finished = json.loads(again.stdout)["files_finished"]
        partly += 0 < len(done_at_kill) < len(files)
        if 0 < len(done_at_kill) < len(files):  # the second run finished the rest, and said so
            assert len(finished) == len(files), (trial, finished)
        assert [p.read_text() for p in files] == [f"{n}: one\n" for n in NAMES], trial
        for path in files:
            if path.name in done_at_kill:
                assert path.stat().st_ino == done_at_kill[path.name], (trial, path.name)
        tail = journal.read_bytes()[size:].decode(errors="replace").splitlines()
        for path in files:
            settled = [
                line for line in tail if f'"path": "{path}"' in line and '"status": "done"' in line
            ]
            assert len(settled) == 1, (trial, mode, k, path.name, tail)
        said = _said(run_koog, session)
        assert not any("make them two" in s for s in said), (trial, said)
    print(f"kills that left files to restore: {interrupted}, mid-way: {partly} of 15")
    assert interrupted >= 5 and partly >= 2


def test_files_outside_the_folder_or_over_the_bound_are_not_covered_and_never_touched(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """Acceptance 4: a file outside the working folder and one over journal_max_bytes:
    listed as not covered, never touched; the rest of the rollback goes on."""
    config = tmp_path / "journal.toml"
    config.write_text("[serve]\njournal_max_bytes = 1024\n")
    env = {**koog_env, "KOOG_CONFIG": str(config)}
    served, home, work = _started(env, tmp_path)
    outside, big, small = tmp_path / "outside.txt", work / "big.txt", work / "small.txt"
    writes = [(outside, "out there\n"), (big, "x" * 4000 + "\n"), (small, "small\n")]
    calls = [
        {"id": f"toolu_{n}", "name": "Write",
         "arguments": json.dumps({"file_path": str(path), "content": text})}
        for n, (path, text) in enumerate(writes)
    ]  # fmt: skip
    server.enqueue({"tool_calls": calls}, {"content": "Wrote three."})
    try:
        claude = str(agents / "claude")
        _run(ClaudeCode(), [claude, "-p", "write three", *ALLOWED], home, work, served.url)
    finally:
        assert served.stop() == 0
    assert [p.read_text() for p, _ in writes] == [t for _, t in writes]
    session = _session(run_koog)
    done = run_koog("rollback", "-s", session, "--latest", "--yes", "--json", env=env)
    assert done.returncode == 0, done.stderr
    fates = {f["path"]: (f["status"], f["detail"] or "") for f in json.loads(done.stdout)["files"]}
    assert fates[str(small)] == ("removed", "")
    assert fates[str(outside)][0] == "not covered" and "outside" in fates[str(outside)][1]
    assert fates[str(big)][0] == "not covered" and "journal_max_bytes" in fates[str(big)][1]
    assert not small.exists()
    assert outside.read_text() == "out there\n" and big.read_text() == "x" * 4000 + "\n"
    shown = run_koog("rollback", "-s", session, "--latest", "--yes", env=env)  # undo it
    assert shown.returncode == 0 and small.read_text() == "small\n", shown.stderr
    # The journal and the contents it kept go with the session.
    data = Path(koog_env["KOOG_DATA_DIR"])
    assert list((data / "edits" / "contents").iterdir())
    deleted = run_koog("history", "delete", session, "--yes", env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert not list((data / "edits" / "sessions").iterdir())
    assert not list((data / "edits" / "contents").iterdir())


def test_http_and_repl_rollbacks_set_files_back_and_a_persons_change_is_kept(
    agents: Path,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    run_koog: Run,
    tmp_path: Path,
) -> None:
    """`POST /koog/v1/sessions/NAME/rollback` and the REPL's /rollback take the one path:
    the files go with the conversation; `why` names the prompt's edits; a file a person
    changed is never overwritten (acceptance 2)."""
    from tests.conftest import KOOG_BIN
    from tests.support.serving import KoogServe, http
    from tests.support.terminal import Terminal

    notes, _ = _two_turns(agents, koog_env, server, tmp_path)
    session = _session(run_koog)
    why = run_koog("why", "-s", session, "--json")
    assert json.loads(why.stdout)["file_edits"] == ["edited notes.txt (+1 \u22121)"], why.stdout
    served = KoogServe(koog_env).start()
    try:
        base = served.url.removesuffix("/v1")
        status, body = http("POST", f"{base}/koog/v1/sessions/{session}/rollback", {})
    finally:
        assert served.stop() == 0
    assert status == 200, body
    assert [(f["path"], f["status"]) for f in body["files"]] == [(str(notes), "restored")]
    assert notes.read_text() == "version one\n"
    terminal = Terminal([KOOG_BIN, "chat", "-s", session], koog_env)
    try:
        terminal.wait_for(f"{session}>")
        terminal.send("/rollback\r")  # the last change: the HTTP rollback, undone
        terminal.wait_for("set back")
        terminal.send("y\r")
        terminal.wait_for(f"restored: {notes}")
        terminal.send("/exit\r")
        assert terminal.close() == 0
    finally:
        if terminal.child.poll() is None:
            terminal.child.kill()
    assert notes.read_text() == "version two\n"
    # Acceptance 2: a person changes the file; the rollback exits 2 naming it and changes
    # nothing; forced, the conversation rolls back, the file stays, the report names it.
    notes.write_text("version two, and a person's line\n")
    before = _said(run_koog, session)
    refused = run_koog("rollback", "-s", session, "--latest", "--yes")
    assert refused.returncode == 2, refused.stderr
    assert str(notes) in refused.stderr and "Traceback" not in refused.stderr
    assert notes.read_text() == "version two, and a person's line\n"
    assert _said(run_koog, session) == before
    forced = run_koog("rollback", "-s", session, "--latest", "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert notes.read_text() == "version two, and a person's line\n"
    assert f"left: {notes}" in forced.stderr, forced.stderr
    assert not any("make it version two" in s for s in _said(run_koog, session))
