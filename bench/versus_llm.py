"""A one-shot turn of koog against Simon Willison's `llm` on the same local server.

Goal (issue 12): koog's median wall time ≤ 0.8x llm's. Both store the exchange (koog its
session files and checkpoints, llm its SQLite log); both are asked "hi" and get an instant
reply from tests/fakes/openai_server.py. Runs alternate koog / llm; medians are reported.
Beside them, the floor of any tool built on the openai SDK: a Python script that imports it
and makes the same streamed request, storing nothing.

    python bench/versus_llm.py [--runs 15] [--llm-venv DIR] [--against OTHER_KOOG] [--schema]

`--schema` (issue 56: koog no slower than llm): both ask for structured output with the
same concise schema, `name, age int`, and get fitting JSON; koog checks it against the
schema (jsonschema) before printing it, as llm prints what came.

Without --llm-venv, `llm` is installed from PyPI into a temporary virtual environment.
`--against` times another build's `koog chat hi` in the same alternating rounds (its own
data dir), e.g. the build at 9468aed installed in a venv of its own.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import KOOG, clean_env

SDK_ALONE = """
import openai
stream = openai.OpenAI().chat.completions.create(
    model="fake", stream=True, messages=[{"role": "user", "content": "hi"}]
)
print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
"""


def install_llm(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "llm"]
    subprocess.run(pip, check=True)
    return folder / "bin" / "llm"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {done.stderr.decode()[-400:]}")
    return elapsed


def main() -> None:
    from tests.fakes.openai_server import FakeOpenAIServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--llm-venv", type=Path)
    parser.add_argument("--against", help="another build's koog, timed in the same rounds")
    parser.add_argument("--schema", action="store_true", help="a --schema one-shot for both")
    args = parser.parse_args()
    server = FakeOpenAIServer().start()
    schema = ["--schema", "name, age int"] if args.schema else []
    if args.schema:
        server.responder = lambda body: {"content": '{"name": "Ada Lovelace", "age": 36}'}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            llm = args.llm_venv / "bin" / "llm" if args.llm_venv else install_llm(root / "llm-venv")
            home = root / "llm-home"
            home.mkdir()
            (home / "extra-openai-models.yaml").write_text(
                f'- model_id: fake\n  model_name: fake\n  api_base: "{server.base_url}"\n'
                + ("  supports_schema: true\n" if args.schema else "")
            )
            llm_env = {**clean_env(root / "unused"), "LLM_USER_PATH": str(home)}
            koog_env = clean_env(
                root / "koog", OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench"
            )
            koog_argv = [KOOG, "chat", *schema, "hi"]  # a new session per call, as llm starts one
            llm_argv = [str(llm), "-m", "fake", *schema, "hi"]
            sdk_argv = [sys.executable, "-c", SDK_ALONE]
            other_argv = [args.against, "chat", "hi"] if args.against else None
            other_env = clean_env(
                root / "other", OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench"
            )
            timed(koog_argv, koog_env), timed(llm_argv, llm_env)  # warm the caches
            if other_argv:
                timed(other_argv, other_env)
            koog_times, llm_times, sdk_times, other_times = [], [], [], []
            for _ in range(args.runs):
                koog_times.append(timed(koog_argv, koog_env))
                llm_times.append(timed(llm_argv, llm_env))
                sdk_times.append(timed(sdk_argv, koog_env))
                if other_argv:
                    other_times.append(timed(other_argv, other_env))
            koog_median = statistics.median(koog_times)
            llm_median = statistics.median(llm_times)
            sdk_median = statistics.median(sdk_times)
            version = subprocess.run([str(llm), "--version"], capture_output=True, text=True)
            print(f"{version.stdout.strip()}; {args.runs} alternating pairs")
            asked = " ".join(repr(a) if " " in a else a for a in schema)
            print(f"koog chat {asked} hi:    {koog_median * 1000:6.0f} ms median")
            print(f"llm -m fake {asked} hi:  {llm_median * 1000:6.0f} ms median")
            print(f"openai SDK alone: {sdk_median * 1000:6.0f} ms median (import, one request)")
            print(f"ratio koog / llm: {koog_median / llm_median:.2f}")
            print(f"ratio SDK alone / llm: {sdk_median / llm_median:.2f}")
            if other_times:
                other_median = statistics.median(other_times)
                print(f"{args.against} chat hi: {other_median * 1000:6.0f} ms median")
                print(f"ratio koog / that build: {koog_median / other_median:.2f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
