"""What `koog serve` adds to a request: the same streamed chat completions sent straight
to the upstream and through koog (each with its own session, resending its growing
conversation as clients do), 10 streams at once, paired and alternating in one run.

Goal (issue 26): added latency per request, median at 10 concurrent streams, ≤ 15 ms.

    python bench/serve.py [--turns 20] [--streams 10] [--delay 0.05]

The upstream is the local test server answering after `--delay` seconds with a reply of
a few words, word by word; a request is timed from its start to `data: [DONE]`, read by a plain
HTTP client (`http.client`) so the load generator stays light.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from common import KOOG, PYTHON, ROOT, clean_env


def _timed(url: str, convo: list[dict[str, str]], headers: dict[str, str]) -> float:
    """One streamed request, read to `data: [DONE]` by a plain HTTP client (the load
    generator shares this machine's two cores with both servers: it must stay light)."""
    parts = urlsplit(url)
    body = json.dumps({"model": "gpt-4o-mini", "messages": convo, "stream": True})
    start = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.request(
        "POST",
        parts.path + "/chat/completions",
        body,
        {"Content-Type": "application/json", "Authorization": "Bearer b", **headers},
    )
    answer = conn.getresponse()
    text = []
    for line in answer:
        if line.startswith(b"data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
        elif line.startswith(b"data: [DONE]"):
            break
    elapsed = time.perf_counter() - start
    conn.close()
    if answer.status != 200:
        raise SystemExit(f"{url} answered {answer.status}")
    convo.append({"role": "assistant", "content": "".join(text)})
    return elapsed


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.05)
    args = parser.parse_args()
    # The upstream runs in a process of its own, as a real one would.
    upstream = subprocess.Popen(
        [PYTHON, "-m", "tests.fakes.openai_server", "--port", "0", "--delay", str(args.delay)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upstream.stdout is not None
    base_url = upstream.stdout.readline().split()[-1]
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(Path(tmp) / "data", OPENAI_BASE_URL=base_url)
        env.update(OPENAI_API_KEY="bench", KOOG_MODEL="gpt-4o-mini")
        server = subprocess.Popen(
            [KOOG, "serve", "--port", "0"], env=env, stdout=subprocess.PIPE, text=True
        )
        assert server.stdout is not None
        found = re.search(r"(http://\S+/v1)", server.stdout.readline())
        if found is None:
            raise SystemExit("koog serve did not start")
        direct: list[float] = []
        through: list[float] = []
        lock = threading.Lock()

        def client(index: int) -> None:
            straight, koog = base_url, found.group(1)
            mine: list[dict[str, str]] = []
            theirs: list[dict[str, str]] = []
            session = {"X-Koog-Session": f"bench{index}"}
            for n in range(args.turns + 1):  # the first pair warms up
                for convo in (mine, theirs):
                    convo.append({"role": "user", "content": f"question {n} from {index}"})
                order = [(straight, mine, {}), (koog, theirs, session)]
                if (n + index) % 2:
                    order.reverse()
                times = {url: _timed(url, convo, h) for url, convo, h in order}
                if n:
                    with lock:
                        direct.append(times[straight])
                        through.append(times[koog])

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu = _cpu_seconds(server.pid)
        server.terminate()
        server.wait(30)
    upstream.terminate()
    added = [b - a for a, b in zip(direct, through, strict=True)]
    print(f"{args.streams} concurrent streams x {args.turns} turns, upstream delay {args.delay}s")
    print(f"direct to the upstream:   median {statistics.median(direct) * 1000:7.1f} ms")
    print(f"through koog serve:       median {statistics.median(through) * 1000:7.1f} ms")
    print(f"added per request:        median {statistics.median(added) * 1000:7.1f} ms (goal ≤ 15)")
    requests = args.streams * (args.turns + 1)
    print(
        f"koog serve CPU:           {cpu / requests * 1000:7.1f} ms per request (start-up included)"
    )


if __name__ == "__main__":
    main()
