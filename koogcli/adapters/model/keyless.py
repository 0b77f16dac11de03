"""Model and embedding clients whose upstream never shows its key to anyone (SPEC §6: the
upstream key never leaves the server; §5.8).

Every client here is wrapped once, by the composition root, with the key it sends
(core/key_scrub.py), so whatever protocol and path an answer takes (chat completions,
Responses, Messages; streamed or not; passed through or translated) the upstream's words
pass KeyScrub before koog shows, relays or stores them:

- a failure (ModelError): its message, hint and the upstream's own error object, which
  `koog chat` prints and `koog serve` answers with or sends as an error event;
- a passed-through request's raw events and bodies, as sent to the client: an error event
  loses the key and its masked forms, any other event the exact key;
- a reply's text, reasoning and tool-call arguments, streamed pieces included (a key split
  across two pieces too), and the models the endpoint lists: the exact key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from koogcli.adapters.model.endpoint import NO_KEY, Endpoint
from koogcli.core.errors import ModelError
from koogcli.core.key_scrub import Holdback, KeyScrub
from koogcli.core.model_port import ChatModel, Completion, ModelRequest
from koogcli.core.ports import Embedder

# An event or body holding one of these is an error's words.
_ERRORS = ('"error"', "response.failed")


def sent_key(endpoint: Endpoint) -> str:
    """The key the endpoint's requests carry ("" when none is configured)."""
    return "" if endpoint.api_key == NO_KEY else endpoint.api_key


class KeylessModel:
    def __init__(self, inner: ChatModel, key: str) -> None:
        self.inner = inner
        self.scrub = KeyScrub(key)

    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        scrub = self.scrub
        if not scrub:
            return self.inner.complete(request, on_delta, on_reasoning)
        text, thought = _Sink(on_delta, scrub), _Sink(on_reasoning, scrub)
        given = request.passthrough
        if given is not None and given.sink is not None:
            relay = given.sink
            request = replace(
                request, passthrough=replace(given, sink=lambda raw: relay(self.raw(raw)))
            )
        try:
            done = self.inner.complete(request, text.callback, thought.callback)
        except ModelError as exc:
            scrubbed(exc, scrub)
            raise
        text.end()
        thought.end()
        calls = tuple(replace(c, arguments=scrub.reply(c.arguments)) for c in done.tool_calls)
        return replace(
            done,
            text=scrub.reply(done.text),
            reasoning=scrub.reply(done.reasoning),
            tool_calls=calls,
        )

    def raw(self, raw: str) -> str:
        """An event or body as the upstream sent it, for a passed-through request's client."""
        if any(mark in raw for mark in _ERRORS):
            return self.scrub.text(raw)
        return self.scrub.reply(raw)

    def list_models(self) -> list[str]:
        try:
            return [self.scrub.reply(name) for name in self.inner.list_models()]
        except ModelError as exc:
            scrubbed(exc, self.scrub)
            raise


class KeylessEmbedder:
    def __init__(self, inner: Embedder, key: str) -> None:
        self.inner = inner
        self.scrub = KeyScrub(key)

    def embed(self, texts: list[str]) -> list[list[float]]:
        try:
            return self.inner.embed(texts)
        except ModelError as exc:
            scrubbed(exc, self.scrub)
            raise


def scrubbed(exc: ModelError, scrub: KeyScrub) -> ModelError:
    """`exc` itself, its words now without the key (its type, status and cause kept)."""
    if scrub:
        exc.message = scrub.text(exc.message)
        exc.args = (exc.message, *exc.args[1:])
        exc.hint = scrub.text(exc.hint) if exc.hint else exc.hint
        if exc.upstream is not None:
            exc.upstream = scrub.value(exc.upstream)
    return exc


class _Sink:
    """A delta callback whose pieces pass a Holdback; `end` gives what it held back."""

    def __init__(self, given: Callable[[str], None] | None, scrub: KeyScrub) -> None:
        self.given = given
        self.held = Holdback(scrub)
        self.callback = None if given is None else self._piece

    def _piece(self, piece: str) -> None:
        shown = self.held.feed(piece)
        if shown and self.given is not None:
            self.given(shown)

    def end(self) -> None:
        rest = self.held.flush()
        if rest and self.given is not None:
            self.given(rest)
