"""Per-turn overhead beyond the model: one-shot turns on a 10,000-message session versus a
10-message one (no window), against the local test server answering instantly.

    python bench/turn_overhead.py [--runs 10]

The gap between the two medians is the cost of loading, preprocessing and storing history.
The in-process figures time load + commit alone, without interpreter start-up.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import KOOG, clean_env, median_seconds, seed_session


def in_process(data: Path, name: str, runs: int) -> float:
    from koogcli.adapters.file_history import FileHistoryStore
    from koogcli.adapters.paths import DataDir
    from koogcli.core.chat_memory import ChatMemory
    from koogcli.core.messages import assistant, system, user
    from koogcli.core.names import SessionName
    from koogcli.core.preprocessors import Pipeline

    memory = ChatMemory(FileHistoryStore(DataDir(data)), Pipeline())
    live = [system("You are a helpful assistant.")]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        loaded = memory.load(SessionName(name), live)
        memory.commit(SessionName(name), live, loaded, [user("q"), assistant("a")])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    from tests.fakes.openai_server import FakeOpenAIServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    server = FakeOpenAIServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            env = clean_env(data, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench")
            results = {}
            for size in (10, 10_000):
                name = f"s{size}"
                seed_session(data, name, size)
                results[size] = median_seconds([KOOG, "chat", "-s", name, "hi"], runs, env)
                inproc = in_process(data, name, runs)
                print(
                    f"{size:6d} messages: one-shot turn median {results[size] * 1000:7.1f} ms; "
                    f"load+store in process {inproc * 1000:6.1f} ms"
                )
            gap = results[10_000] - results[10]
            print(f"gap (cost of a 10,000-message history per turn): {gap * 1000:.1f} ms")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
