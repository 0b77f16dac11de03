"""What a one-shot turn costs as the stored history grows: whole `koog chat` processes
(checkpoints included) on sessions of 10, 1,000, 10,000 and 50,000 messages, against the
local test server answering instantly.

    python bench/turn_overhead.py [--runs 7] [--sizes 10,1000,10000,50000]
                                  [--against OTHER/bin/koog] [--no-model] [--window N]

`--against` measures another installed koog beside this one, turn for turn alternating,
each on its own copy of the sessions (paired: noise falls on both alike). A model is
configured (KOOG_MODEL), as for any real use; `--no-model` leaves it out, so koog asks the
local test server for its first model each turn.

For each size: a warm-up turn first (it takes the restore point that puts the whole history
in the session's checkpoint objects, as any earlier turn would have), then `--runs` turns,
sizes alternating so the machine's noise falls on all of them alike. Reported medians: wall
time, CPU (user + system), peak RSS, and bytes written — `wchar` (every write call) and
`write_bytes` (what reached the storage layer) from /proc/PID/io, read after the process
has exited but before it is reaped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import KOOG, ROOT, clean_env

SEED = f"""
import sys
sys.path[:0] = [{str(ROOT / "bench")!r}, {str(ROOT)!r}]
from pathlib import Path
from common import seed_session
seed_session(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
"""


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mib: float
    wchar: int
    write_bytes: int


def one_turn(argv: list[str], env: dict[str, str]) -> Run:
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
    wall = time.perf_counter() - start
    io = dict(line.split(": ") for line in Path(f"/proc/{child.pid}/io").read_text().splitlines())
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{argv} failed: {child.stderr.read().decode()[-400:]}")  # type: ignore[union-attr]
    return Run(
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
        int(io["wchar"]),
        int(io["write_bytes"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sizes", default="10,1000,10000,50000")
    parser.add_argument("--against", default="", help="another koog binary, measured beside")
    parser.add_argument("--no-model", action="store_true", help="configure no model")
    parser.add_argument("--window", type=int, default=0, help="a window preprocessor of N messages")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    binaries = [KOOG, *([args.against] if args.against else [])]
    # The server runs in a process of its own: it keeps every request it answered, and
    # this process's memory would otherwise show in the children's peak RSS (fork).
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = server.stdout.readline().split()[-1]  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            model = {} if args.no_model else {"KOOG_MODEL": "gpt-4o-mini"}
            if args.window:
                config = Path(tmp) / "window.toml"
                config.write_text(
                    f'[[chat_memory.preprocessors]]\ntype = "window"\nsize = {args.window}\n'
                )
                model["KOOG_CONFIG"] = str(config)
            envs = {
                koog: {
                    **clean_env(
                        Path(tmp) / f"data{i}", OPENAI_BASE_URL=base_url, OPENAI_API_KEY="bench"
                    ),
                    **model,
                }
                for i, koog in enumerate(binaries)
            }
            runs: dict[tuple[str, int], list[Run]] = {(k, s): [] for k in binaries for s in sizes}
            for koog, env in envs.items():
                for size in sizes:
                    # Seeded by a child: this process stays small, so the turns' peak RSS
                    # is theirs, not this process's memory inherited through fork.
                    data = env["KOOG_DATA_DIR"]
                    subprocess.run(
                        [sys.executable, "-c", SEED, data, f"s{size}", str(size)], check=True
                    )
                    one_turn([koog, "chat", "-s", f"s{size}", "warm up"], env)
            for _ in range(args.runs):
                for size in sizes:
                    for koog, env in envs.items():
                        argv = [koog, "chat", "-s", f"s{size}", "hi"]
                        runs[koog, size].append(one_turn(argv, env))
            for koog in binaries:
                if len(binaries) > 1:
                    print(koog)
                _report(sizes, [runs[koog, size] for size in sizes])
    finally:
        server.terminate()
        server.wait()


def _report(sizes: list[int], runs: list[list[Run]]) -> None:
    print(
        f"{'messages':>9} {'wall ms':>8} {'CPU ms':>8} {'RSS MiB':>8} "
        f"{'wchar KiB':>10} {'written KiB':>12}"
    )
    for size, done in zip(sizes, runs, strict=True):
        print(
            f"{size:9d} {statistics.median(r.wall for r in done) * 1000:8.0f} "
            f"{statistics.median(r.cpu for r in done) * 1000:8.0f} "
            f"{statistics.median(r.rss_mib for r in done):8.1f} "
            f"{statistics.median(r.wchar for r in done) / 1024:10.1f} "
            f"{statistics.median(r.write_bytes for r in done) / 1024:12.1f}"
        )
    base = statistics.median(r.cpu for r in runs[0])
    top = statistics.median(r.cpu for r in runs[-1])
    print(f"CPU at {sizes[-1]:,} messages / at {sizes[0]:,}: {top / base:.2f}x")


if __name__ == "__main__":
    main()
