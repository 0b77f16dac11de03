"""Memory stays bounded by what koog keeps, not by what it is offered: three hostile inputs,
each a whole `koog` process against the local test server, with its peak RSS (its own or
any child's, such as a tool's process) and exit code.

    python bench/limits.py [--stdin-mb 200] [--tool-mb 50] [--tail-gb 3]

- 200 MB on standard input: refused (exit 2) after reading chat.max_input_bytes.
- A tool returning 50 MB: cut to tool_settings.max_result_bytes with a note, turn stored.
- A 3 GB zero-filled tail on a session log (what a crash can leave): `history show --last
  1` and `history list` skip it as a torn line, reading it in bounded pieces.
Goal (issue 24): peak RSS under 300 MB in each.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import KOOG, ROOT, clean_env

TOOL = '''
def big(size_mb: int) -> str:
    """A result of size_mb megabytes."""
    return "x" * (size_mb * 1024 * 1024)
'''


def measured(
    argv: list[str], env: dict[str, str], stdin: object = None
) -> tuple[int, float, float]:
    """(exit code, peak RSS MiB of the process and its children, seconds)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv,
        env=env,
        stdin=stdin or subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdin-mb", type=int, default=200)
    parser.add_argument("--tool-mb", type=int, default=50)
    parser.add_argument("--tail-gb", type=float, default=3.0)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(args.tool_mb)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = server.stdout.readline().split()[-1]  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            data = Path(tmp) / "data"
            env = clean_env(data, OPENAI_BASE_URL=base_url, OPENAI_API_KEY="b", KOOG_MODEL="m")
            rows = []
            feeder = subprocess.Popen(
                ["head", "-c", str(args.stdin_mb * 1024 * 1024), "/dev/zero"],
                stdout=subprocess.PIPE,
            )
            code, rss, took = measured(
                [KOOG, "chat", "-s", "piped", "summarise"], env, feeder.stdout
            )
            feeder.kill()
            rows.append((f"{args.stdin_mb} MB on standard input", code, rss, took))
            (Path(tmp) / "bench_tools.py").write_text(TOOL)
            (data / "none.toml").write_text('[[tools]]\ncallable = "bench_tools:big"\n')
            code, rss, took = measured(
                [KOOG, "chat", "-s", "tool", "call it"], {**env, "PYTHONPATH": tmp}
            )
            rows.append((f"a tool returning {args.tool_mb} MB", code, rss, took))
            (data / "none.toml").write_text("")
            for text in ("one", "two"):
                subprocess.run(
                    [KOOG, "chat", "-s", "tail", text],
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
            log = data / "sessions" / "tail.log"
            with log.open("ab") as handle:
                handle.truncate(log.stat().st_size + int(args.tail_gb * 1024**3))
            for what in (["history", "show", "-s", "tail", "--last", "1"], ["history", "list"]):
                code, rss, took = measured([KOOG, *what], env)
                rows.append((f"{args.tail_gb:g} GB zero tail: {' '.join(what)}", code, rss, took))
            print(f"{'case':<50} {'exit':>4} {'peak RSS MiB':>13} {'seconds':>8}")
            for case, code, rss, took in rows:
                print(f"{case:<50} {code:>4} {rss:>13.1f} {took:>8.2f}")
            print(f"largest peak: {max(r[2] for r in rows):.1f} MiB (goal < 300)")
    finally:
        server.terminate()
        server.wait()


SERVER = """
import sys
from tests.fakes.openai_server import FakeOpenAIServer
server = FakeOpenAIServer()
size = int(sys.argv[1])
def answer(body):
    if body["messages"][-1]["role"] == "tool":
        return {"content": "got %d bytes" % len(body["messages"][-1]["content"])}
    if body.get("tools"):
        return {"tool_calls": [{"name": "big", "arguments": {"size_mb": size}}]}
    return {"content": "ok"}
server.responder = answer
print("serving", server.base_url, flush=True)
server.httpd.serve_forever()
"""


if __name__ == "__main__":
    main()
