"""How far a passed-through Messages request travels inside koog before it reaches the
upstream client: the koog modules it crosses and the step at which the wire client is
called (issue 53 counts these before and after a change).

    python bench/request_path.py

A `koog serve` app runs in this process (Starlette's test client), its upstream the local
test server speaking Messages (`wire_api = "messages"`), retrieval on, a session named.
After one request to warm up (imports, the session made), the second request is traced:
every call of a function of `koogcli` in any thread (comprehensions and lambdas aside) is a
step, until `MessagesChatModel.complete` is called. Printed: the steps before it, the
modules crossed, and their names in the order first met.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PACKAGE = str(ROOT / "koogcli")
SKIPPED = {"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"}


def main() -> None:
    from starlette.testclient import TestClient

    from tests.fakes.openai_server import FakeOpenAIServer

    upstream = FakeOpenAIServer()
    threading.Thread(target=upstream.httpd.serve_forever, daemon=True).start()
    home = Path(tempfile.mkdtemp(prefix="koog-path-"))
    config = home / "config.toml"
    config.write_text(
        f'[llm]\nmodel = "claude-up"\nbase_url = "{upstream.base_url}"\nwire_api = "messages"\n'
        "[long_term_memory.retrieval]\nenabled = true\n"
    )
    env = {
        **os.environ,
        "KOOG_CONFIG": str(config),
        "KOOG_DATA_DIR": str(home / "data"),
        "ANTHROPIC_API_KEY": "upstream-key",
        "HOME": str(home),
    }
    from koogcli.server.app import create_app
    from koogcli.server.state import ServerState
    from koogcli.services import compose

    state = ServerState(compose.build(env=env), workers=2)
    headers = {"X-Koog-Session": "path", "anthropic-version": "2023-06-01"}
    convo: list[dict[str, Any]] = [{"role": "user", "content": "When does the ferry leave?"}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": convo}
    steps: list[tuple[str, str]] = []
    reached: list[int] = []
    tracing: list[bool] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event != "call" or reached or not tracing:
            return
        code = frame.f_code
        if not code.co_filename.startswith(PACKAGE) or code.co_name in SKIPPED:
            return
        module = Path(code.co_filename).relative_to(ROOT).with_suffix("").as_posix()
        steps.append((module, code.co_qualname))
        if code.co_qualname == "MessagesChatModel.complete":
            reached.append(len(steps))

    # Set before any thread of the app starts (a thread takes the profile it starts with).
    threading.setprofile(profile)
    sys.setprofile(profile)
    with TestClient(create_app(state), base_url="http://127.0.0.1") as client:
        first = client.post("/v1/messages", json=body, headers=headers)
        assert first.status_code == 200, first.text
        convo += [
            {"role": "assistant", "content": first.json()["content"]},
            {"role": "user", "content": "And the lighthouse?"},
        ]
        tracing.append(True)
        try:
            second = client.post("/v1/messages", json=body, headers=headers)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        assert second.status_code == 200, second.text
    state.pool.shutdown(wait=True)
    upstream.httpd.shutdown()
    if not reached:
        raise SystemExit("the upstream client was never called")
    modules = list(dict.fromkeys(m for m, _ in steps[: reached[0]]))
    print(f"upstream client reached at step {reached[0]}; modules crossed: {len(modules)}")
    for name in modules:
        print(f"  {name}")


if __name__ == "__main__":
    main()
