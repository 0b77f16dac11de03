"""Listings that should not grow with the stored history: `koog history list` over 200
sessions of 1,000 messages, and `koog history show --last 5` on a 50,000-message session.

Goal (issue 12): both ≤ 0.25 s, medians of whole processes.

    python bench/listing.py [--runs 7]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import KOOG, clean_env, median_seconds, seed_session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        env = clean_env(data)
        for i in range(200):
            seed_session(data, f"s{i:03d}", 1000)
        seed_session(data, "long", 50_000)
        listed = median_seconds([KOOG, "history", "list"], runs, env)
        tail = median_seconds([KOOG, "history", "show", "-s", "long", "--last", "5"], runs, env)
        floor = median_seconds([KOOG, "--version"], runs, env)
        print("201 sessions, 250,000 messages in all")
        print(f"history list:                    {listed * 1000:6.0f} ms")
        print(f"history show --last 5 (50,000):  {tail * 1000:6.0f} ms")
        print(f"koog --version (start-up floor): {floor * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
