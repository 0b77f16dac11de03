"""Token counts a server reported for a model request, kept with the reply (SPEC §5.4a).

A reply's `meta["usage"]` is `Usage.to_dict()`: the prompt, completion and total tokens, and
`cached_tokens` (the prompt tokens the server's prompt cache served) only when the server
reported that figure, so a stored record tells a server that said 0 (it read the whole
prompt again) from one that said nothing. Records stored before the figure was read have no
such key and read back as not reported. Adapters read the figures (adapters/model/
cache_figures.py); nothing here invents one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts a server reported for one request (or summed over a turn's requests)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    # §5.4a: the prompt tokens the server read from its prompt cache instead of computing
    # them again. None: the server did not say (not the same as 0, a full re-read).
    cached_tokens: int | None = None

    def plus(self, more: Usage | None) -> Usage:
        if more is None:
            return self
        cached = (
            None
            if self.cached_tokens is None and more.cached_tokens is None
            else (self.cached_tokens or 0) + (more.cached_tokens or 0)
        )
        return Usage(
            self.prompt_tokens + more.prompt_tokens,
            self.completion_tokens + more.completion_tokens,
            self.total_tokens + more.total_tokens,
            cached,
        )

    def to_dict(self) -> dict[str, int]:
        """As stored in a reply's `meta["usage"]`: `cached_tokens` only when the server
        reported it, so a record says which servers did."""
        out = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_tokens is not None:
            out["cached_tokens"] = self.cached_tokens
        return out

    @classmethod
    def from_dict(cls, raw: object) -> Usage | None:
        """A stored `meta["usage"]` read back; None for one that is missing or damaged.
        Records stored before cached tokens were read have no `cached_tokens`: not reported."""
        if not isinstance(raw, Mapping):
            return None
        counts = [raw.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in counts):
            return None
        cached = raw.get("cached_tokens")
        if not isinstance(cached, int) or isinstance(cached, bool) or cached < 0:
            cached = None
        return cls(int(counts[0]), int(counts[1]), int(counts[2]), cached)  # type: ignore[arg-type]
