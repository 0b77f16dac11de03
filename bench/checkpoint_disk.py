"""Disk use of automatic checkpoints: 1,000 turns (every third one calling a tool), then the
checkpoint folder against the transcript. Goals: at most 3x the transcript (issue 3), 1.5x
by `du` (issue 12).

    python bench/checkpoint_disk.py [--turns 1000]

Runs the real turn service and file stores in-process with a scripted model, so the
figure is about storage, not the model or process start-up.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (puts the repository on sys.path)


def apparent(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def on_disk(path: Path) -> int:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) * 1024


def main() -> None:
    from koogcli.core.messages import ToolCall
    from koogcli.core.names import SessionName
    from koogcli.core.ports import Completion
    from koogcli.services import context
    from koogcli.services.turn import TurnRequest, run_turn
    from tests.fakes.chat_model import FakeChatModel

    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    turns = parser.parse_args().turns
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "bench_tools.py").write_text(
            "def note(text: str) -> str:\n    '''Write a note.'''\n    return 'noted: ' + text\n"
        )
        (root / "config.toml").write_text('[[tools]]\ncallable = "bench_tools:note"\n')
        env = {
            **os.environ,
            "KOOG_DATA_DIR": str(root / "data"),
            "KOOG_CONFIG": str(root / "config.toml"),
        }
        model = FakeChatModel(
            lambda r: (
                "A reply of ordinary length that answers the question "
                "with a couple of sentences. " * 2
            )
        )
        ctx = context.build(env=env, model_factory=lambda c: model)
        session = SessionName("bench")
        start = time.perf_counter()
        for i in range(turns):
            if i % 3 == 0:
                model.enqueue(
                    Completion("", (ToolCall(f"c{i}", "note", f'{{"text": "item {i}"}}'),))
                )
            run_turn(ctx, TurnRequest(session, f"Question number {i}: what about this topic?"))
        elapsed = time.perf_counter() - start
        data = root / "data"
        transcript = apparent(data / "transcripts")
        checkpoints = apparent(data / "checkpoints")
        files = sum(1 for p in (data / "checkpoints").rglob("*") if p.is_file())
        kept = len(ctx.checkpoints.headers(session))
        print(
            f"{turns} turns in {elapsed:.1f}s ({elapsed / turns * 1000:.1f} ms per turn, in process)"
        )
        print(
            f"transcript  {transcript / 1024:8.1f} KiB (bytes), {on_disk(data / 'transcripts') / 1024:8.1f} KiB (du)"
        )
        print(
            f"checkpoints {checkpoints / 1024:8.1f} KiB (bytes), {on_disk(data / 'checkpoints') / 1024:8.1f} KiB (du), {kept} checkpoints in {files} files"
        )
        print(
            f"ratio       {checkpoints / transcript:.2f}x by bytes, "
            f"{on_disk(data / 'checkpoints') / on_disk(data / 'transcripts'):.2f}x by du  (goals <= 3x, <= 1.5x by du)"
        )


if __name__ == "__main__":
    main()
