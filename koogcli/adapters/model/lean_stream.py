"""A streamed chat completion without the openai SDK, for `koog chat`'s turns.

Importing the SDK costs a one-shot turn about 0.3 s, more than everything else koog does
for it (`python -X importtime`: openai 435 ms of a 0.85 s turn). A streamed request needs
none of it: the body is JSON koog built, the answer server-sent events read as JSON (as
`koog serve`'s forwarder reads them, model/forwarding.py). This sends it over the SDK's own
HTTP package (model/native_http.py) with the SDK's retry rules, and fails as the SDK would
be read: an HttpFailure (status, body) or the HTTP package's error, which
openai_model.OpenAIChatModel turns into the same ModelError it makes of the SDK's. What
needs the SDK (a non-streamed request, listing models, embeddings, a server that answers a
stream with one JSON object) imports it then.
"""

from __future__ import annotations

from typing import Any

from koogcli.adapters.model import sse
from koogcli.adapters.model.forwarding import ForwardedStream
from koogcli.adapters.model.native_http import HttpFailure, NativeHttp


class LeanPoster:
    """POSTs of streamed chat completions to one endpoint, the key in its header."""

    def __init__(self, base_url: str, api_key: str, timeout: float, max_retries: int) -> None:
        headers = {"authorization": f"Bearer {api_key}", "accept": "text/event-stream"}
        self.http = NativeHttp(base_url, headers, timeout, max_retries)

    def open(self, body: dict[str, Any], bounds: sse.Bounds) -> ForwardedStream:
        """The streamed answer, read within `bounds`; an error event mid-stream is an
        HttpFailure."""
        return ForwardedStream(self.http.post("/chat/completions", body), bounds, _failure)


def _failure(error: object, message: str) -> Exception:
    return HttpFailure(200, {"error": error}, message)
