"""`koog serve` under hostile load (issue 30, SPEC §6 "Bounds"): a 100 MB body, 70
requests waiting on one session beside another session's request, 1,000 connections that
never finish their request head. One real server, its upstream the local test server.

    python bench/serve_limits.py [--body-mb 100] [--burst 70] [--idle 1000]

Goals: the body → 413 in under 1 s, peak RSS under 100 MB, nothing stored; the other
session answers within 1 s of its usual time; every idle connection closed by the header
timeout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from common import KOOG, PYTHON, ROOT, clean_env

from tests.support import limit_probes


def _start(cmd: list[str], env: dict[str, str], pattern: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if pattern not in line:
        proc.kill()
        raise SystemExit(f"{cmd[0]} did not start: {line!r}")
    return proc, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--body-mb", type=int, default=100)
    parser.add_argument("--burst", type=int, default=70)
    parser.add_argument("--idle", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        upstream, line = _start(
            [PYTHON, "-u", "-m", "tests.fakes.openai_server", "--port", "0"],
            {**clean_env(data), "PYTHONPATH": str(ROOT)},
            "http://",
        )
        base = line.split()[-1].rstrip("/")
        base = base if base.endswith("/v1") else base + "/v1"
        config = Path(tmp) / "koog.toml"
        config.write_text("[serve]\nheader_timeout_seconds = 2.0\nsession_queue = 100\n")
        env = clean_env(data, OPENAI_BASE_URL=base, OPENAI_API_KEY="k", KOOG_MODEL="gpt-4o-mini")
        env["KOOG_CONFIG"] = str(config)
        serve, line = _start([KOOG, "serve", "--port", "0"], env, "koog serve:")
        url = line.split()[2]
        try:
            limit_probes.turn_seconds(url, "warm", "hello")
            print(f"koog serve at rest: {limit_probes.peak_rss_mib(serve.pid):.0f} MiB peak RSS")
            for chunked in (False, True):
                found = limit_probes.big_body(url, args.body_mb << 20, chunked)
                how = "chunked" if chunked else "Content-Length"
                print(
                    f"{args.body_mb} MB body ({how}): HTTP {found.status} in "
                    f"{found.seconds * 1000:.0f} ms, {found.sent_mib:.0f} MiB sent by then"
                )
            print(f"  peak RSS {limit_probes.peak_rss_mib(serve.pid):.0f} MiB")

            def delayed() -> None:
                request = urllib.request.Request(
                    base.removesuffix("/v1") + "/_control/enqueue",
                    data=json.dumps([{"delay": 3.0, "content": "slow"}]).encode(),
                    method="POST",
                )
                urllib.request.urlopen(request, timeout=10).read()

            found_burst = limit_probes.burst(url, args.burst, 3.0, delayed)
            print(
                f"{args.burst} requests on one session (first held 3 s): another session "
                f"{found_burst.during * 1000:.0f} ms (usual {found_burst.usual * 1000:.0f} ms); "
                f"the burst's answers {found_burst.statuses}"
            )
            start = time.perf_counter()
            closed, opened = limit_probes.half_sent(url, args.idle, 3.5)
            print(
                f"{opened} half-sent connections: {closed} closed by the header timeout (2 s) "
                f"within {time.perf_counter() - start:.1f} s"
            )
            listed = subprocess.run(
                [KOOG, "history", "list", "--json"], env=env, capture_output=True, text=True
            )
            names = [s["session"] for s in json.loads(listed.stdout)]
            print(f"the 100 MB body stored nothing: {'big' not in names} ({len(names)} sessions)")
        finally:
            serve.terminate()
            serve.wait(30)
            upstream.terminate()
            upstream.wait(10)
    sys.exit(0)


if __name__ == "__main__":
    main()
