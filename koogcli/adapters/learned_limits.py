"""Context sizes koog learned from servers' refusals, per endpoint and model (SPEC §5:
overflow recovery that fits). A local server configured without `context_tokens` still
says its size when it refuses ("maximum context length is 2048 tokens"); remembered in the
data dir's `learned.json`, every later turn and compression plans for it. A cache: a file
that cannot be read counts as empty and is written anew."""

from __future__ import annotations

import json
from pathlib import Path

from koogcli.adapters import atomic, paths
from koogcli.core.errors import KoogError


class LearnedLimits:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._known: dict[str, dict[str, int]] | None = None

    def get(self, endpoint: str, model: str) -> int | None:
        return self._read().get(endpoint, {}).get(model)

    def put(self, endpoint: str, model: str, limit: int) -> None:
        """Remember a limit (the file rewritten whole, under its lock)."""
        paths.ensure_dir(self.path.parent)
        with atomic.file_lock(self.path.with_suffix(".lock")):
            self._known = None
            known = self._read()
            known.setdefault(endpoint, {})[model] = limit
            atomic.write_text(self.path, json.dumps(known, indent=1, sort_keys=True))

    def _read(self) -> dict[str, dict[str, int]]:
        if self._known is not None:
            return self._known
        known: dict[str, dict[str, int]] = {}
        try:
            raw = (
                json.loads(atomic.read_bytes(self.path, limit=1 << 20))
                if self.path.exists()
                else {}
            )
        except (KoogError, ValueError, RecursionError):
            raw = {}
        if isinstance(raw, dict):
            for endpoint, models in raw.items():
                if isinstance(models, dict):
                    known[str(endpoint)] = {
                        str(m): n
                        for m, n in models.items()
                        if isinstance(n, int) and not isinstance(n, bool) and n > 0
                    }
        self._known = known
        return known
