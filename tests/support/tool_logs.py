"""Python tools written for one test, and the log they keep: each tool appends one JSON
array a line to `$TOOL_LOG`, so a test counts what ran, even across killed processes."""

from __future__ import annotations

import json
from pathlib import Path

LOGGER = """
import json, os, time
def _log(*entry):
    with open(os.environ["TOOL_LOG"], "a") as f:
        f.write(json.dumps(list(entry)) + "\\n")
"""


def tool_env(folder: Path, module: str, source: str, config: str) -> dict[str, str]:
    """`source` (after LOGGER) as `module.py` in `folder`, `config` as the config file: the
    environment a koog run needs to offer those tools."""
    (folder / f"{module}.py").write_text(LOGGER + source)
    path = folder / f"{module}.toml"
    path.write_text(config)
    return {
        "KOOG_CONFIG": str(path),
        "TOOL_LOG": str(folder / "tools.log"),
        "PYTHONPATH": str(folder),
    }


def logged(env: dict[str, str]) -> list[list[object]]:
    """Every whole line of the log (a line a killed tool left torn is passed over)."""
    path = Path(env["TOOL_LOG"])
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("]")]
