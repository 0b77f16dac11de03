"""Streaming render cost: a 3,000-word Markdown reply in 5-character deltas through the
real reply writer into a 120x40 pseudo-terminal, against rendering the finished text once.

Goal (issue 11): streamed ≤ 1.5x the single render, and the terminal (screen plus
scrollback, as a VT100 emulator shows it) holds each paragraph exactly once.

    python bench/render.py [--runs 5] [--words 3000]

Runs alternate streamed / once in the same terminal size; medians are reported. Another
checkout's writer (say, from before issue 11) is measured with --source:
    git worktree add /tmp/old <rev> && python bench/render.py --source /tmp/old
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from common import ROOT

sys.path.insert(0, str(ROOT))

WORDS = [
    "koog",
    "keeps",
    "the",
    "history",
    "of",
    "every",
    "session",
    "in",
    "a",
    "file",
    "the",
    "user",
    "can",
    "read",
    "and",
    "the",
    "model",
    "answers",
    "with",
    "text",
    "that",
    "streams",
    "into",
    "the",
    "terminal",
    "while",
    "the",
    "reader",
    "waits",
    "for",
    "it",
]


def markdown_reply(words: int) -> str:
    """A reply of about `words` words mixing what models write: headings, paragraphs,
    lists, code and a table. Each paragraph carries a unique marker `P<n>.`."""
    blocks: list[str] = []
    count = 0
    n = 0
    while count < words:
        n += 1
        body = " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(60))
        blocks.append(f"P{n}. {body} with **bold {n}** and `code {n}`.")
        count += 62
        if n % 5 == 0:
            blocks.append(f"## Section {n // 5}")
        if n % 4 == 0:
            blocks.append("\n".join(f"- item {n}.{i}: {WORDS[i]} {WORDS[i + 1]}" for i in range(4)))
            count += 16
        if n % 6 == 0:
            blocks.append(f"```python\ndef step_{n}(x):\n    return x * {n}\n```")
            count += 6
        if n % 9 == 0:
            rows = "\n".join(f"| {i} | {WORDS[i]} | {i * n} |" for i in range(4))
            blocks.append(f"| n | word | product |\n|---|---|---|\n{rows}")
            count += 12
    return "\n\n".join(blocks)


def child(mode: str, words: int, pace: float) -> None:
    """Runs on the pseudo-terminal: render, then report seconds on stderr (CPU seconds
    when paced, so the pauses between deltas do not count)."""
    text = markdown_reply(words)
    if source := os.environ.get("KOOG_BENCH_SOURCE"):
        sys.path.insert(0, source)
    # Imports are a process's one-time cost, not rendering: both modes load them first.
    from rich.console import Console
    from rich.live import Live  # noqa: F401
    from rich.markdown import Markdown

    if source and not os.path.exists(os.path.join(source, "koogcli", "ui", "reply.py")):
        from koogcli.cli.render import ReplyWriter  # a checkout from before the ui package
    else:
        from koogcli.ui.reply import ReplyWriter
    clock = time.process_time if pace else time.perf_counter
    start = clock()
    if mode == "once":
        Console().print(Markdown(text))
    else:
        writer = ReplyWriter(sys.stdout, markdown=True)
        for i in range(0, len(text), 5):
            writer.delta(text[i : i + 5])
            if pace:
                time.sleep(pace)
        writer.finish()
    sys.stderr.write(f"{clock() - start:.4f}\n")


def main() -> None:
    from tests.support.terminal import run_on_terminal

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--words", type=int, default=3000)
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=0.0,
        help="pause between deltas, as a model streams (CPU time is compared then)",
    )
    parser.add_argument("--source", help="a koog checkout whose writer to measure")
    args = parser.parse_args()
    env = {**os.environ, "TERM": "xterm-256color"}
    if args.source:
        env["KOOG_BENCH_SOURCE"] = args.source
    env.pop("NO_COLOR", None)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (env.get("PYTHONPATH", ""), str(ROOT / "bench")) if p
    )
    times: dict[str, list[float]] = {"stream": [], "once": []}
    copies: list[int] = []
    paragraphs = markdown_reply(args.words).count("\n\nP") + 1
    for _ in range(args.runs):
        for mode in ("stream", "once"):
            argv = [sys.executable, __file__, "--child", mode, str(args.words), str(args.pace_ms)]
            done = run_on_terminal(argv, env, 120, 40, timeout=600)
            if done.returncode:
                raise SystemExit(done.stderr)
            times[mode].append(float(done.stderr.split()[-1]))
            if mode == "stream":
                found = [f"P{n}." for n in range(1, paragraphs + 1)]
                text = done.text
                copies.append(max(text.count(marker + " ") for marker in found))
                missing = [m for m in found if m + " " not in text]
                if missing:
                    raise SystemExit(f"paragraphs missing from the terminal: {missing[:5]}")
    stream, once = statistics.median(times["stream"]), statistics.median(times["once"])
    pace = f", {args.pace_ms:g} ms apart (CPU time)" if args.pace_ms else " at once"
    print(f"reply: {args.words} words, {paragraphs} paragraphs, 5-character deltas{pace}, 120x40")
    print(
        f"streamed render: {stream:.3f} s   single render: {once:.3f} s   ratio {stream / once:.2f}"
    )
    print(f"most copies of one paragraph in screen + scrollback: {max(copies)}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) / 1000)
    else:
        main()
