"""Chunked compression against a server that takes 0.5 s per request: 16 chunks at
concurrency 4 versus 1. Goal (issue 4): at most 1.5x the ideal 4 x 0.5 s, and at least 3x
faster than concurrency 1.

    python bench/compress_concurrency.py [--latency 0.5] [--chunks 16]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (puts the repository on sys.path)


def timed(data: Path, base_url: str, concurrency: int, chunk_size: int) -> tuple[float, int]:
    from koogcli.core.names import SessionName
    from koogcli.services import compose
    from koogcli.services.compression import CompressRequest, StrategyChoice, compress

    config = data / f"c{concurrency}.toml"
    config.write_text(
        f"[compression]\nconcurrency = {concurrency}\n[persistence]\nenabled = false\n"
    )
    env = {
        **os.environ,
        "KOOG_DATA_DIR": str(data),
        "KOOG_CONFIG": str(config),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "bench",
        "KOOG_MAX_RETRIES": "0",
    }
    ctx = compose.build(env=env)
    request = CompressRequest(
        SessionName("c"), StrategyChoice("chunked", chunk_size=chunk_size), dry_run=True
    )
    start = time.perf_counter()
    result = compress(ctx, request)
    return time.perf_counter() - start, result.requests


def main() -> None:
    from common import seed_session

    from tests.fakes.openai_server import FakeOpenAIServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--chunks", type=int, default=16)
    args = parser.parse_args()
    import openai  # noqa: F401  (imported up front so neither run pays for it)

    server = FakeOpenAIServer().start()
    server.default_delay = args.latency
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            chunk_size = 4
            # The live system prompt makes one more message: chunks * size - 1 stored ones.
            seed_session(data, "c", args.chunks * chunk_size - 1)
            results = {c: timed(data, server.base_url, c, chunk_size) for c in (4, 1)}
            ideal = args.chunks / 4 * args.latency
            for c, (seconds, requests) in results.items():
                print(f"concurrency {c}: {seconds:5.2f} s for {requests} requests")
            four, one = results[4][0], results[1][0]
            print(f"concurrency 4 vs ideal {ideal:.2f} s: {four / ideal:.2f}x (goal <= 1.5x)")
            print(f"concurrency 1 vs 4: {one / four:.2f}x faster (goal >= 3x)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
