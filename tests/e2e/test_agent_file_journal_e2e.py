"""The journal of an agent's file edits on the wire (issue 47): a passed-through stream
holds a tool call until koog has journalled the file it names, and `[serve.clients.NAME]
files = false` journals nothing."""

from __future__ import annotations

import json
from http.client import HTTPConnection
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.serving import KoogServe, http

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


def _write(server: FakeOpenAIServer, path: Path, chunk_delay: float = 0.0) -> None:
    arguments = json.dumps({"file_path": str(path), "content": "new\n"})
    call = {"id": "toolu_w1", "name": "Write", "arguments": arguments}
    server.enqueue({"tool_calls": [call], "chunk_delay": chunk_delay})


def test_a_relayed_tool_call_reaches_the_agent_only_once_its_file_is_journalled(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, data_dir: Path
) -> None:
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
            if text.startswith("data:") and '"tool_use"' in text and not seen_call:
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
