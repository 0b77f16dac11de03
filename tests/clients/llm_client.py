"""llm, the CLI: two models registered through `extra-openai-models.yaml`
in a fresh LLM_USER_PATH, each with `api_base` and `headers: {X-Koog-Session: ...}`.
`llm -m koog-chat 'one'`, `llm -c 'two'`, then `llm chat` for three turns on its stdin (a
new conversation under the same header), then `llm -m koog-tools --functions CODE` and
`llm -c --functions CODE` (llm runs the tool), each command a process of its own. Prints
JSON: the replies (one per turn; `llm chat` prints each after its `> ` prompt) and the
tool's calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import args

base_url, chat_session, tools_session = args()
LLM = str(Path(sys.executable).parent / "llm")
FUNCTIONS = '''
import json


def element(c: str) -> str:
    """Name the chemical element whose symbol is c."""
    names = {"O": "oxygen", "Fe": "iron", "Na": "sodium"}
    with open(CALLS, "a") as log:
        log.write(json.dumps({"c": c}) + "\\n")
    return names.get(c, "unknown")
'''

home = Path(tempfile.mkdtemp(prefix="llm-user-"))
calls = home / "calls.jsonl"
models = [
    {
        "model_id": model_id,
        "model_name": "gpt-4o-mini",
        "api_base": base_url,
        "headers": {"X-Koog-Session": session},
        "supports_tools": True,
    }
    for model_id, session in (("koog-chat", chat_session), ("koog-tools", tools_session))
]
# JSON is YAML: llm reads the file with yaml.safe_load.
(home / "extra-openai-models.yaml").write_text(json.dumps(models, indent=2))
env = {**os.environ, "LLM_USER_PATH": str(home)}
code = f"CALLS = {str(calls)!r}\n{FUNCTIONS}"


def llm(*argv: str, stdin: str = "") -> str:
    done = subprocess.run(
        [LLM, *argv], input=stdin, capture_output=True, text=True, env=env, timeout=60
    )
    if done.returncode != 0:
        sys.exit(f"llm {' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return done.stdout.strip()


replies = [llm("-m", "koog-chat", "one"), llm("-c", "two")]
chatted = llm("chat", "-m", "koog-chat", stdin="three\nfour\nfive\nexit\n")
replies += [line.removeprefix("> ") for line in chatted.splitlines() if line.startswith("> ")][:3]
replies += [
    llm("-m", "koog-tools", "--functions", code, "element O"),
    llm("-c", "--functions", code, "element Fe"),
]
tool_calls = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
print(json.dumps({"replies": replies, "tool_calls": tool_calls}))
