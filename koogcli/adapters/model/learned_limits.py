"""What koog learned from servers, per endpoint and model, in the data dir's
`learned.json` (SPEC §5: overflow recovery that fits). A local server configured without
`context_tokens` still says its size when it refuses ("maximum context length is 2048
tokens"): every later turn and compression plans for it. A model whose summaries ran on
to their limit is remembered too, so automatic compression does not spend every turn on a
summary it cannot write. A cache: a file that cannot be read counts as empty and is
written anew."""

from __future__ import annotations

import json
from pathlib import Path

from koogcli.adapters import atomic, paths
from koogcli.core.errors import KoogError

_Facts = dict[str, dict[str, int]]  # endpoint -> model -> a positive integer
_KINDS = ("limits", "summaries_cut", "told")


class LearnedLimits:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._known: dict[str, _Facts] | None = None

    def get(self, endpoint: str, model: str) -> int | None:
        """The context size the server named."""
        return self._read()["limits"].get(endpoint, {}).get(model)

    def put(self, endpoint: str, model: str, limit: int) -> None:
        self._put("limits", endpoint, model, limit)

    def summaries_cut(self, endpoint: str, model: str) -> int | None:
        """When (Unix seconds) the model last cut off a summary at its limit."""
        return self._read()["summaries_cut"].get(endpoint, {}).get(model)

    def note_summary_cut(self, endpoint: str, model: str, when: int) -> None:
        self._put("summaries_cut", endpoint, model, when)

    def told(self, endpoint: str, model: str) -> bool:
        """Whether a one-shot already said this endpoint's model was chosen for the user."""
        return model in self._read()["told"].get(endpoint, {})

    def note_told(self, endpoint: str, model: str, when: int) -> None:
        self._put("told", endpoint, model, when)

    def _put(self, kind: str, endpoint: str, model: str, value: int) -> None:
        """Remember a fact (the file rewritten whole, under its lock)."""
        paths.ensure_dir(self.path.parent)
        with atomic.file_lock(self.path.with_suffix(".lock")):
            self._known = None
            known = self._read()
            known[kind].setdefault(endpoint, {})[model] = value
            kept = {k: v for k, v in known.items() if v}
            atomic.write_text(self.path, json.dumps(kept, indent=1, sort_keys=True))

    def _read(self) -> dict[str, _Facts]:
        if self._known is not None:
            return self._known
        try:
            raw = (
                json.loads(atomic.read_bytes(self.path, limit=1 << 20))
                if self.path.exists()
                else {}
            )
        except (KoogError, ValueError, RecursionError):
            raw = {}
        if not isinstance(raw, dict):
            raw = {}
        if raw and not any(kind in raw for kind in _KINDS):
            raw = {"limits": raw}  # the first layout: limits only
        self._known = {kind: _facts(raw.get(kind)) for kind in _KINDS}
        return self._known


def _facts(raw: object) -> _Facts:
    known: _Facts = {}
    if isinstance(raw, dict):
        for endpoint, models in raw.items():
            if isinstance(models, dict):
                known[str(endpoint)] = {
                    str(m): n
                    for m, n in models.items()
                    if isinstance(n, int) and not isinstance(n, bool) and n > 0
                }
    return known
