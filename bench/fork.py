"""What forking costs as a session grows: `koog history fork` of a 50,000-message session
against a 10-message one, paired and alternating in one run, whole processes.

Goal (issue 27): ≤ 100 ms more for 50,000 messages than for 10, medians.

    python bench/fork.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import KOOG, clean_env, seed_session, timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        env = clean_env(data)
        seed_session(data, "short", 10)
        seed_session(data, "long", 50_000)
        times: dict[str, list[float]] = {"short": [], "long": []}
        for n in range(runs + 1):  # the first pair warms up
            order = ["short", "long"] if n % 2 else ["long", "short"]
            for name in order:
                at = "8" if name == "short" else "40000"
                took = timed([KOOG, "history", "fork", "-s", name, "--at", at, f"{name}{n}"], env)
                if n:
                    times[name].append(took)
        short, long = (statistics.median(times[k]) for k in ("short", "long"))
    print(f"fork of 10 messages:      {short * 1000:7.0f} ms")
    print(f"fork of 50,000 messages:  {long * 1000:7.0f} ms")
    print(f"more for 50,000:          {(long - short) * 1000:7.0f} ms (goal ≤ 100)")


if __name__ == "__main__":
    main()
