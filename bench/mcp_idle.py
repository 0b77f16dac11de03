"""What a configured MCP server costs a one-shot turn that calls none of its tools
(issue 46: at most 0.3 s). `mcp-server-time` configured against no MCP server, paired and
alternating, medians; the server's tools were listed once before (the data dir keeps them).

    python bench/mcp_idle.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from common import KOOG, PYTHON, ROOT, timed

sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAIServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    upstream = FakeOpenAIServer().start()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        time_server = Path(PYTHON).parent / "mcp-server-time"
        (folder / "mcp.toml").write_text(
            f'[[mcp.servers]]\nname = "time"\ncommand = "{time_server}"\n'
        )
        (folder / "none.toml").write_text("")
        env = dict(
            os.environ,
            OPENAI_BASE_URL=upstream.base_url,
            OPENAI_API_KEY="bench",
            KOOG_MODEL="m",
            KOOG_DATA_DIR=str(folder / "data"),
        )

        def turn(config: str) -> float:
            return timed(
                [KOOG, "chat", "-s", "idle", "hi"], {**env, "KOOG_CONFIG": str(folder / config)}
            )

        turn("mcp.toml")  # the server listed once
        took: dict[str, list[float]] = {"mcp.toml": [], "none.toml": []}
        for n in range(args.runs):
            for config in ("mcp.toml", "none.toml")[:: 1 if n % 2 else -1]:
                took[config].append(turn(config))
    with_mcp, without = (statistics.median(took[c]) for c in ("mcp.toml", "none.toml"))
    print(f"one-shot, no tool called: {with_mcp:.3f} s with an MCP server, {without:.3f} s without")
    print(f"the server costs {with_mcp - without:+.3f} s (median of {args.runs} pairs)")
    upstream.stop()


if __name__ == "__main__":
    main()
