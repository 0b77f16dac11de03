"""Start-up time: `koog --help` and `koog history show` against the floor `import typer`.

Goal (issue 2): both within 2.5x of `<venv>/bin/python -c "import typer"`, medians of >= 10
runs, with no openai, prompt_toolkit or rich.markdown imported on those paths.

    python bench/startup.py [--runs 15] [--against OTHER_KOOG]

`--against` times another build's `koog` beside this one, paired: the two alternate run by
run, and the ratio of their medians is printed (this machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from common import KOOG, PYTHON, clean_env, median_seconds, seed_session

HEAVY = ("openai", "prompt_toolkit", "rich.markdown", "mcp")


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [PYTHON, "-X", "importtime", "-m", "koogcli", *argv],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    return [h for h in HEAVY if h in names]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--against", help="another build's koog, timed alternately")
    args = parser.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        seed_session(data, "S", 200)
        env = clean_env(data)
        floor = median_seconds([PYTHON, "-c", "import typer"], runs, env)
        cases = {
            "koog --help": [KOOG, "--help"],
            "koog history show -s S (200 messages)": [KOOG, "history", "show", "-s", "S"],
        }
        print(f"floor  python -c 'import typer'  median {floor * 1000:7.1f} ms  ({runs} runs)")
        for label, argv in cases.items():
            t = median_seconds(argv, runs, env)
            heavy = heavy_imports(argv[1:], env)
            print(
                f"{label:40s} median {t * 1000:7.1f} ms  {t / floor:4.2f}x floor  "
                f"heavy imports: {', '.join(heavy) or 'none'}"
            )
        if args.against:
            _paired(cases, args.against, runs, env)


def _paired(cases: dict[str, list[str]], other: str, runs: int, env: dict[str, str]) -> None:
    import statistics
    import time

    for label, argv in cases.items():
        times: dict[str, list[float]] = {"this": [], "other": []}
        for n in range(runs * 2):
            which = "this" if n % 2 == 0 else "other"
            command = argv if which == "this" else [other, *argv[1:]]
            start = time.perf_counter()
            subprocess.run(command, env=env, capture_output=True, stdin=subprocess.DEVNULL)
            times[which].append(time.perf_counter() - start)
        mine, theirs = statistics.median(times["this"]), statistics.median(times["other"])
        print(
            f"{label:40s} this {mine * 1000:7.1f} ms · other {theirs * 1000:7.1f} ms · "
            f"{mine / theirs:4.2f}x (paired, {runs} each)"
        )


if __name__ == "__main__":
    main()
