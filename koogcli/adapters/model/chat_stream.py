"""A streamed chat completion read as plain JSON chunks: each server-sent event's data
parsed (within the reply's bounds, model/sse.py) and read by attribute, as the wire client
reads a chunk, so a chunk is a thin view of its dict and no typed model is built."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from koogcli.adapters.model import sse
from koogcli.adapters.model.native_http import HttpFailure
from koogcli.core import bounded_json


class Fields:
    """A JSON object read by attribute, as the SDK's models are: a missing key is None."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, Any]:
        """The object as it was read."""
        return self._data

    def __getattr__(self, name: str) -> Any:
        value = self._data.get(name)
        if isinstance(value, dict):
            return Fields(value)
        if isinstance(value, list):
            return [Fields(v) if isinstance(v, dict) else v for v in value]
        return value


class ChunkStream:
    """The upstream's streamed answer: `response` (its status and headers), iterated as
    chunks within `bounds`, closed on leaving `with`. An error event raises an HttpFailure
    (status 200: the answer had begun) with the upstream's error."""

    def __init__(
        self,
        response: Any,
        bounds: sse.Bounds,
    ) -> None:
        self.response = response
        self.bounds = bounds

    def __enter__(self) -> ChunkStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.response.close()

    def __iter__(self) -> Iterator[Fields]:
        for _, data in sse.events(self.response, self.bounds):
            if not data:
                continue  # comments and other fields only (a keep-alive)
            if data.startswith("[DONE]"):
                return
            chunk = bounded_json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                said = error.get("message") if isinstance(error, dict) else None
                message = (
                    said if isinstance(said, str) and said else "An error occurred during streaming"
                )
                raise HttpFailure(200, {"error": error}, message)
            yield Fields(chunk if isinstance(chunk, dict) else {})
