"""The journal of an agent's file edits on the wire (issue 47): a passed-through stream
holds a tool call until koog has journalled the file it names, and `[serve.clients.NAME]
files = false` journals nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.client import HTTPConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.fakes.openai_server import ID_PROFILES, FakeOpenAIServer
from tests.support.serving import KoogServe, as_another_user, http

pytestmark = pytest.mark.e2e

WRITE_TOOL = {
    "name": "Write",
    "description": "Write a file",
    "input_schema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    },
}


def _body(work: Path, stream: bool) -> dict[str, object]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "stream": stream,
        "system": [{"type": "text", "text": f" - Primary working directory: {work}"}],
        "tools": [WRITE_TOOL],
        "messages": [{"role": "user", "content": "write notes.txt"}],
    }


def _write(
    server: FakeOpenAIServer, path: Path, chunk_delay: float = 0.0, content: str = "new\n"
) -> None:
    arguments = json.dumps({"file_path": str(path), "content": content})
    call = {"id": "toolu_w1", "name": "Write", "arguments": arguments}
    server.enqueue({"tool_calls": [call], "chunk_delay": chunk_delay})


@pytest.mark.parametrize("framing", ["events", "data-only"])
def test_a_relayed_tool_call_reaches_the_agent_only_once_its_file_is_journalled(
    framing: str,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    data_dir: Path,
) -> None:
    """The hold keys on the event's type, whatever the framing: an upstream that sends
    `data:` lines only let the agent have the call before its file was journalled."""
    if framing == "data-only":
        server.quirks = {"data_only_sse"}
    config = isolated / "relay.toml"
    config.write_text(
        f'[llm]\nmodel = "claude-up"\nbase_url = "{server.base_url}"\nwire_api = "messages"\n'
    )
    env = {**koog_env, "KOOG_CONFIG": str(config), "ANTHROPIC_API_KEY": "k", "KOOG_MODEL": ""}
    work = isolated / "work"
    work.mkdir()
    (work / "notes.txt").write_text("old\n")
    journal = data_dir / "edits" / "sessions" / "claude-s1.jsonl"
    _write(server, work / "notes.txt", chunk_delay=0.3)  # the call streams slowly
    served = KoogServe(env).start()
    try:
        where = urlsplit(served.url)
        conn = HTTPConnection(where.hostname or "", where.port, timeout=30)
        headers = {
            "content-type": "application/json",
            "anthropic-version": "2023-06-01",
            "x-claude-code-session-id": "s1",
        }
        conn.request("POST", "/v1/messages", json.dumps(_body(work, True)), headers)
        answer = conn.getresponse()
        assert answer.status == 200
        seen_call = False
        while line := answer.readline():
            text = line.decode()
            if '"tool_use"' in text and not seen_call:
                seen_call = True  # the agent could run it now: its file is journalled
                events = [json.loads(e) for e in journal.read_text().splitlines()]
                assert [(e["kind"], e["path"]) for e in events] == [
                    ("edit", str(work / "notes.txt"))
                ]
        conn.close()
        assert seen_call
    finally:
        assert served.stop() == 0


def test_files_false_journals_nothing(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, data_dir: Path
) -> None:
    config = isolated / "off.toml"
    config.write_text("[serve.clients.claude]\nfiles = false\n")
    work = isolated / "work"
    work.mkdir()
    _write(server, work / "notes.txt")
    served = KoogServe({**koog_env, "KOOG_CONFIG": str(config)}).start()
    try:
        base = served.url.removesuffix("/v1")
        headers = {"anthropic-version": "2023-06-01", "x-claude-code-session-id": "s2"}
        status, body = http("POST", f"{base}/v1/messages", _body(work, False), headers)
        assert status == 200 and body["content"][-1]["type"] == "tool_use", body
    finally:
        assert served.stop() == 0
    assert not (data_dir / "edits").exists()


def _agent(served: KoogServe, work: Path, session: str) -> Callable[..., dict[str, Any]]:
    """Claude Code's requests by hand: each call sends the whole conversation so far."""
    conversation: list[dict[str, Any]] = []
    base = served.url.removesuffix("/v1")
    headers = {"anthropic-version": "2023-06-01", "x-claude-code-session-id": session}

    def say(*content: dict[str, Any] | str) -> dict[str, Any]:
        blocks = [{"type": "text", "text": c} if isinstance(c, str) else c for c in content]
        conversation.append({"role": "user", "content": blocks})
        body = {**_body(work, False), "messages": conversation}
        status, reply = http("POST", f"{base}/v1/messages", body, headers)
        assert status == 200, reply
        conversation.append({"role": "assistant", "content": reply["content"]})
        return reply

    return say


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    [call] = [b for b in reply["content"] if b["type"] == "tool_use"]
    return {"type": "tool_result", "tool_use_id": call["id"], "content": "done"}


def _writes(
    server: FakeOpenAIServer, say: Callable[..., dict[str, Any]], path: Path, text: str = "new\n"
) -> None:
    """One prompt of the agent: the model calls Write, the agent writes the file (as its
    tool does) and sends the result back."""
    _write(server, path, content=text)
    reply = say(f"write {path.name}")
    path.write_text(text)
    server.enqueue({"content": "Wrote it."})
    say(_result(reply))


def test_a_folder_swapped_for_a_link_since_the_edit_is_never_followed(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Any
) -> None:
    """The agent wrote docs/notes.md; then docs became a link to a folder elsewhere
    holding the same file: the rollback must not remove that file (refused; forced,
    left)."""
    work, elsewhere = isolated / "work", isolated / "elsewhere"
    (work / "docs").mkdir(parents=True)
    elsewhere.mkdir()
    notes = work / "docs" / "notes.md"
    served = KoogServe(koog_env).start()
    try:
        _writes(server, _agent(served, work, "s3"), notes)
    finally:
        assert served.stop() == 0
    (elsewhere / "notes.md").write_text("new\n")
    notes.unlink()
    (work / "docs").rmdir()
    (work / "docs").symlink_to(elsewhere)
    refused = run_koog("rollback", "-s", "claude-s3", "--latest", "--yes")
    assert refused.returncode == 2 and "outside the working folder" in refused.stderr
    forced = run_koog("rollback", "-s", "claude-s3", "--latest", "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (elsewhere / "notes.md").read_text() == "new\n"
    assert "left:" in forced.stderr


def test_a_result_sent_with_the_users_own_words_starts_a_new_prompt(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Any
) -> None:
    """Results alone continue the prompt's turn (no restore point); sent with the user's
    words (Claude Code after Esc) they start one, so rollback --latest takes back only it."""
    work = isolated / "work"
    work.mkdir()
    served = KoogServe(koog_env).start()
    try:
        say = _agent(served, work, "s4")
        _write(server, work / "a.txt")
        first = say("write a")
        (work / "a.txt").write_text("new\n")
        _write(server, work / "b.txt")
        second = say(_result(first), "<system-reminder>a note</system-reminder>")
        (work / "b.txt").write_text("new\n")
        server.enqueue({"content": "Stopped."})
        say(_result(second), "stop, and leave b alone")
    finally:
        assert served.stop() == 0
    points = json.loads(run_koog("checkpoint", "list", "-s", "claude-s4", "--json").stdout)
    assert len(points) == 2 and points[-1]["message_count"] == 0, points  # not 3
    undone = run_koog("rollback", "-s", "claude-s4", "--latest", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert (work / "a.txt").exists() and (work / "b.txt").exists()  # made before it
    shown = run_koog("history", "show", "-s", "claude-s4")
    assert "leave b alone" not in shown.stdout and "write a" in shown.stdout


@pytest.mark.parametrize("profile", ID_PROFILES)
def test_each_id_quirk_keeps_each_edit_its_own_and_rolls_back(
    profile: str,
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Any,
) -> None:
    """Upstreams that give every call one id, none, or a name for an id: each edit still
    has its own id on the wire and in the journal, so the rollback sets the right file
    back to the right content."""
    server.use_profile(profile)
    work = isolated / "work"
    work.mkdir()
    notes = work / "notes.txt"
    served = KoogServe(koog_env).start()
    try:
        say = _agent(served, work, "q1")
        for text in ("one\n", "two\n"):
            _writes(server, say, notes, text)
    finally:
        assert served.stop() == 0
    shown = run_koog("history", "show", "-s", "claude-q1")
    assert shown.stdout.count("notes.txt (+") == 2, shown.stdout  # created, then edited
    done = run_koog("rollback", "-s", "claude-q1", "--latest", "--yes")
    assert done.returncode == 0, done.stderr
    assert notes.read_text() == "one\n", done.stderr
    # One story for the call and its file (issue 52: it said "left in place: Write(...)",
    # then "restored: notes.txt").
    assert "files set back: Write(" in done.stderr and "left in place" not in done.stderr


def test_a_hostile_file_name_is_shown_never_executed_by_the_rollback(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Any
) -> None:
    """A model names a file whose name sets the terminal's title and clears the screen:
    the rollback's report, its question and its refusal show the name, never run it."""
    work = isolated / "work"
    work.mkdir()
    hostile = work / "a\x1b]0;pwned\x07\x1b[2Jb.txt"
    served = KoogServe(koog_env).start()
    try:
        _writes(server, _agent(served, work, "h1"), hostile)
    finally:
        assert served.stop() == 0
    asked = run_koog("rollback", "-s", "claude-h1", "--latest")  # no --yes: refused, named
    hostile.write_text("changed\n")
    refused = run_koog("rollback", "-s", "claude-h1", "--latest", "--yes")
    hostile.write_text("new\n")
    done = run_koog("rollback", "-s", "claude-h1", "--latest", "--yes")
    assert done.returncode == 0 and not hostile.exists(), done.stderr
    for shown in (asked.stderr, refused.stderr, done.stderr):
        assert "\x1b" not in shown and "\x07" not in shown, shown
    assert "^[]0;pwned^G^[[2Jb.txt" in done.stderr and "^[" in refused.stderr


SECRET = "the other folder's secret\n"


def _untouched(outside: Path, names: list[str]) -> None:
    assert sorted(p.name for p in outside.iterdir()) == names  # no temporary file either
    assert all((outside / n).read_text() == SECRET for n in names)


@pytest.mark.slow
def test_a_folder_swapped_for_a_link_in_a_race_leads_no_journal_or_rollback_outside(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, data_dir: Path
) -> None:
    """Issue 51, acceptance 1: a process swaps a folder of the agent's working folder for a
    link to another folder (renameat2, in a tight loop) while koog journals 30 edits and
    then 150 rollbacks are asked for over HTTP: nothing outside is read, written or left behind."""
    from tests.support.swapper import swapping

    work, outside = isolated / "work", isolated / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    for name in ("notes.txt", "raced.txt"):
        (outside / name).write_text(SECRET)
    (work / "sub" / "raced.txt").write_text("inside\n")
    (work / "swap").symlink_to(outside)
    config = isolated / "keep.toml"
    config.write_text("[persistence]\nkeep_last = 1000\n")  # every rollback takes a point
    served = KoogServe({**koog_env, "KOOG_CONFIG": str(config)}).start()
    base = served.url.removesuffix("/v1")
    statuses: list[str] = []
    try:
        say = _agent(served, work, "race")
        with swapping(work / "sub", work / "swap") as journalling:
            for _ in range(30):  # the agent's own writes are not koog's: it writes nothing
                _write(server, work / "sub" / "raced.txt")
                reply = say("write raced.txt")
                server.enqueue({"content": "Wrote it."})
                say(_result(reply))
        _writes(server, say, work / "sub" / "notes.txt")  # one edit to set back and forth
        points = http("GET", f"{base}/koog/v1/sessions/claude-race/checkpoints")[1]
        before_it = {"checkpoint": points[-1]["id"]}  # the point the edit's prompt took
        url = f"{base}/koog/v1/sessions/claude-race/rollback"
        edited = True
        with swapping(work / "sub", work / "swap") as rolling:
            for _ in range(150):  # back before the edit, then forward (undoing that), ...
                status, body = http("POST", url, before_it if edited else {})
                if status == 200:
                    statuses += [f["status"] for f in body["files"]]
                    edited = not edited
                else:  # it saw the link: refused, nothing changed
                    assert "symbolic link" in body["error"]["message"], (status, body)
                    statuses.append("refused")
    finally:
        assert served.stop() == 0
    assert journalling.count > 1000 and rolling.count > 1000
    _untouched(outside, ["notes.txt", "raced.txt"])
    assert not [p for p in work.rglob("*") if ".koog-" in p.name]
    kept = [p.read_text() for p in (data_dir / "edits" / "contents").iterdir()]
    assert SECRET not in kept
    # Both ways were raced: restores went through, and some met the link.
    assert {"restored", "removed"} & set(statuses), statuses
    assert {"refused", "left"} & set(statuses), statuses


AS_ANOTHER_AGENT = """
import json, sys, urllib.request
base, token, work = sys.argv[1:]
headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token,
           "anthropic-version": "2023-06-01", "x-claude-code-session-id": "theirs"}
body = {"model": "claude-sonnet-4-5", "max_tokens": 100,
        "system": " - Primary working directory: " + work,
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "write notes.txt"}]}
def send():
    request = urllib.request.Request(base + "/v1/messages", json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())
reply = send()
call = [b for b in reply["content"] if b["type"] == "tool_use"][0]
body["messages"] += [{"role": "assistant", "content": reply["content"]}, {"role": "user",
    "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "done"}]}]
send()
print("sent")
"""


def test_another_local_users_agent_is_not_journalled_and_its_files_are_never_touched(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Any
) -> None:
    """Issue 51, acceptance 1: a token holder who is another local user names files of a
    folder only the server's user can read: koog reads none of them, lists them as not
    covered, and a rollback leaves them as they are."""
    token = "another-users-token-0123456789"
    config = isolated / "tokens.toml"
    config.write_text(
        f'[[serve.tokens]]\ntoken = "{token}"\nname = "other"\nsessions = [""]\n'
        'namespaces = ["default"]\n'
    )
    theirs = isolated / "theirs"
    theirs.mkdir(mode=0o700)
    (theirs / "notes.txt").write_text(SECRET)
    _write(server, theirs / "notes.txt")
    server.enqueue({"content": "Wrote it."})
    env = {**koog_env, "KOOG_CONFIG": str(config)}
    served = KoogServe(env).start()
    try:
        other = as_another_user(
            AS_ANOTHER_AGENT, served.url.removesuffix("/v1"), token, str(theirs)
        )
        assert other.stdout.strip() == "sent", other.stderr
    finally:
        assert served.stop() == 0
    (theirs / "notes.txt").write_text("changed by its owner\n")
    shown = run_koog("rollback", "-s", "claude-theirs", "--latest", "--yes", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    [fate] = json.loads(shown.stdout)["files"]
    assert fate["status"] == "not covered" and "another local user" in fate["detail"], fate
    assert (theirs / "notes.txt").read_text() == "changed by its owner\n"
    contents = isolated / "data" / "edits" / "contents"
    assert not contents.exists() or not list(contents.iterdir())  # nothing of theirs read


def test_a_prompt_quoting_the_compaction_words_is_a_turn_and_its_edit_is_journalled(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, run_koog: Any
) -> None:
    """Issue 51: Claude Code's compaction is told by its shape (its instruction a block of
    its own, last, opening with the words), not by the words: a prompt that quotes them is
    stored, and its Write is journalled and rolled back."""
    work = isolated / "work"
    work.mkdir()
    notes = work / "notes.txt"
    served = KoogServe(koog_env).start()
    try:
        say = _agent(served, work, "quote")
        _write(server, notes)
        asked = 'Put what "CRITICAL: Respond with TEXT ONLY" means in notes.txt'
        reply = say("<system-reminder>x</system-reminder>", asked)
        notes.write_text("new\n")
        server.enqueue({"content": "Wrote it."})
        say(_result(reply))
    finally:
        assert served.stop() == 0
    shown = run_koog("history", "show", "-s", "claude-quote")
    assert asked in shown.stdout and "created notes.txt" in shown.stdout, shown.stdout
    done = run_koog("rollback", "-s", "claude-quote", "--latest", "--yes")
    assert done.returncode == 0 and not notes.exists(), done.stderr
