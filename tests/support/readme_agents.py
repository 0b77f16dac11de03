"""The README's set-up of each coding agent, read out of the README as a reader pastes it
(section "Coding agents"), with only the address changed: the agent
tests run the real agents on exactly these, so a block that stops working fails there."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.md"
_README_URL = "http://127.0.0.1:8765"


def _section() -> str:
    text = README.read_text()
    return text.split("### Coding agents", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def _block_after(marker: str, language: str) -> str:
    after = _section().split(marker, 1)[1]
    found = re.search(rf"```{language}\n(.*?)```", after, re.DOTALL)
    assert found is not None, f"no {language} block after {marker!r} in the README"
    return found.group(1)


def _here(text: str, url: str) -> str:
    """The README's address (port 8765) made the test server's (`url` ends in /v1)."""
    return text.replace(_README_URL, url.removesuffix("/v1"))


def codex_config(url: str) -> str:
    """`~/.codex/config.toml` as the README gives it (its model name too: koog serve
    answers a Responses request for a name it does not map with llm.model)."""
    block = _here(_block_after("**Codex CLI**", "toml"), url)
    tomllib.loads(block)  # a block that does not parse fails here, naming the README
    return block


def claude_env(url: str) -> dict[str, str]:
    """The variables of the README's `ANTHROPIC_BASE_URL=... claude` line."""
    line = _here(_block_after("**Claude Code**", "sh"), url).strip().splitlines()[0]
    words = line.split()
    assert words[-1] == "claude", line
    return dict(w.split("=", 1) for w in words[:-1])


def opencode_config(url: str) -> dict[str, Any]:
    """`~/.config/opencode/opencode.json` as the README gives it."""
    config: dict[str, Any] = json.loads(_here(_block_after("**opencode**", "json"), url))
    return config
