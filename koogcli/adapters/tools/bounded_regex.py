"""Regular expressions from config, applied with a time bound.

A pattern that backtracks catastrophically (`(a|aa)+$` on a long line) would hang the store
after the reply was printed. Python's `re` cannot be interrupted, so config patterns run on
the `regex` package (the same syntax, with a `timeout`); a pattern that runs out of time is
a configuration error naming its key, and the turn fails with nothing stored.
"""

from __future__ import annotations

import regex  # type: ignore[import-untyped]

from koogcli.core.errors import ConfigError

TIMEOUT_SECONDS = 2.0


class BoundedPattern:
    """The part of `re.Pattern` the preprocessors use, each call bounded in time."""

    def __init__(self, pattern: str, key: str, timeout: float = TIMEOUT_SECONDS) -> None:
        try:
            self._compiled = regex.compile(pattern)
        except regex.error as exc:
            raise ConfigError(f"{key}: invalid regular expression {pattern!r}: {exc}") from exc
        self.pattern = pattern
        self.key = key
        self.timeout = timeout

    def _too_slow(self, text: str) -> ConfigError:
        return ConfigError(
            f"{self.key} = {self.pattern!r} took over {self.timeout:g}s on a "
            f"{len(text)}-character message (catastrophic backtracking); nothing was stored",
            hint="simplify the pattern, e.g. avoid nested repetition like (a+)+",
        )

    def search(self, text: str) -> object | None:
        try:
            found: object | None = self._compiled.search(text, timeout=self.timeout)
            return found
        except TimeoutError as exc:
            raise self._too_slow(text) from exc

    def sub(self, replacement: str, text: str) -> str:
        try:
            return str(self._compiled.sub(replacement, text, timeout=self.timeout))
        except TimeoutError as exc:
            raise self._too_slow(text) from exc
