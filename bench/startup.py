"""Start-up time: `koog --help` and `koog history show` against the floor `import typer`.

Goal (issue 2): both within 2.5x of `<venv>/bin/python -c "import typer"`, medians of >= 10
runs, with no openai, prompt_toolkit or rich.markdown imported on those paths.

    python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from common import KOOG, PYTHON, clean_env, median_seconds, seed_session

HEAVY = ("openai", "prompt_toolkit", "rich.markdown")


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
    runs = parser.parse_args().runs
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


if __name__ == "__main__":
    main()
