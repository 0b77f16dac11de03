"""The chat-completions wire client, for any OpenAI-compatible endpoint, over the one HTTP
transport the other wire clients use (native_http.py): JSON bodies koog built sent as
bytes, answers read as JSON (chat_stream.py), no SDK imported (the openai SDK cost a
one-shot turn 0.3 s to import, and its typed models as much CPU in `koog serve` as the
rest of the turn).

Streams text deltas to a callback, reassembles streamed tool-call fragments by index, and
reports usage, with the prompt tokens the server's cache served wherever it says so
(cache_figures.py: the usage's details, or llama-server's `timings`). Retries are the
transport's (`max_retries`, Retry-After honoured). Every failure becomes one ModelError
naming what to check; request headers (the key) are never logged or shown.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from koogcli.adapters.model import sse
from koogcli.adapters.model.cache_figures import chat_usage
from koogcli.adapters.model.chat_stream import ChunkStream, Fields
from koogcli.adapters.model.endpoint import Endpoint, RequestOptions
from koogcli.adapters.model.native_http import HttpFailure, NativeHttp
from koogcli.adapters.model.refusals import error_detail, status_error
from koogcli.core import bounded_json, content_parts
from koogcli.core.errors import ModelError
from koogcli.core.messages import Message, ToolCall
from koogcli.core.model_port import Completion, ModelRequest


def message_to_wire(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if content_parts.KEY in m.meta:  # the one look-up a message of text alone costs
        given = content_parts.parts(m)
        if given is not None:  # sent as the client sent them, data URLs byte for byte
            out["content"] = content_parts.with_text(given, m.text)
    if m.tool_calls:
        out["tool_calls"] = [c.to_dict() for c in m.tool_calls]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
        if m.name:
            out["name"] = m.name
    return out


def request_body(request: ModelRequest, options: RequestOptions) -> dict[str, Any]:
    """The chat-completions request for `request` (without `stream`): the fields koog sets,
    then config's `extra_body` and the client's own fields over them, then the messages."""
    body: dict[str, Any] = {"model": request.model}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    if options.reasoning_effort is not None:
        body["reasoning_effort"] = options.reasoning_effort
    if request.tools:
        body["tools"] = list(request.tools)
    if request.response_format is not None:
        body["response_format"] = request.response_format
    body.update(options.extra_body)
    body.update(request.extra)
    body.update(request.own_options)
    body["messages"] = [message_to_wire(m) for m in request.messages]
    return body


class OpenAIChatModel:
    def __init__(self, endpoint: Endpoint, options: RequestOptions | None = None) -> None:
        self.endpoint = endpoint
        self.options = options or RequestOptions()
        self._http: NativeHttp | None = None
        # serve's worker threads share one model: the transport is made once (a second one
        # made beside it would be collected, closing its pool under a reply in flight).
        self._made = threading.Lock()
        # Set once the server rejected `stream_options`; one model serves a whole process.
        self.stream_options = True

    @property
    def http(self) -> NativeHttp:
        """The transport, made (and the HTTP package imported) when first needed."""
        with self._made:
            if self._http is None:
                e = self.endpoint
                headers = {"authorization": f"Bearer {e.api_key}"}
                self._http = NativeHttp(e.base_url, headers, e.timeout, e.max_retries)
            return self._http

    def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        """A JSON request answered with one JSON object, read within the reply's bounds."""
        e = self.endpoint
        bounds = sse.Bounds.starting(e.shown_url, e.turn_timeout)
        response = self.http.post(path, body, {"accept": "application/json"})
        with closing(response):
            raw = sse.body(response, bounds)
        try:
            return bounded_json.loads(raw)
        except ValueError as exc:
            raise _unreadable(e, exc) from exc

    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        kwargs = request_body(request, self.options)
        sinks = _Sinks(on_delta, on_reasoning)
        try:
            if request.stream:
                return self._stream(kwargs, sinks)
            return self._whole(kwargs, sinks)
        except ModelError:
            raise
        except Exception as exc:
            raise self._explain(exc, request.model) from exc

    def _whole(self, kwargs: dict[str, Any], sinks: _Sinks) -> Completion:
        raw = self._post("/chat/completions", kwargs)  # no `stream`: a whole answer
        return self._from_completion(Fields(raw if isinstance(raw, dict) else {}), sinks)

    def _from_completion(self, response: Any, sinks: _Sinks) -> Completion:
        if not response.choices:
            raise ModelError(f"{self.endpoint.shown_url} returned no choices")
        choice = response.choices[0]
        text = choice.message.content or ""
        calls = tuple(
            ToolCall(c.id, _text(c.function.name), _arguments(c.function.arguments))
            for c in (choice.message.tool_calls or [])
            if getattr(c, "function", None) is not None
        )
        reasoning = _reasoning(choice.message)
        if reasoning and sinks.reasoning:
            sinks.reasoning(reasoning)
        if text and sinks.text:
            sinks.text(text)
        usage = chat_usage(response.usage, getattr(response, "timings", None))
        return Completion(text, calls, usage, choice.finish_reason, reasoning)

    def _open_stream(self, kwargs: dict[str, Any], bounds: sse.Bounds) -> Any:
        """Ask for a usage chunk; a server that rejects `stream_options` is asked once more
        without it, and never again in this process."""
        if not self.stream_options:
            return self._post_stream(kwargs, False, bounds)
        try:
            return self._post_stream(kwargs, True, bounds)
        except HttpFailure as exc:
            status = getattr(exc, "status_code", None)
            said = f"{getattr(exc, 'message', '')} {error_detail(exc)}"
            if status not in (400, 422) or "stream_options" not in said:
                raise
            stream = self._post_stream(kwargs, False, bounds)
            self.stream_options = False
            return stream

    def _post_stream(self, kwargs: dict[str, Any], usage: bool, bounds: sse.Bounds) -> Any:
        asked: dict[str, Any] = {"stream_options": {"include_usage": True}} if usage else {}
        body = {**kwargs, "stream": True, **asked}
        response = self.http.post("/chat/completions", body, {"accept": "text/event-stream"})
        return ChunkStream(response, bounds)

    def _stream(self, kwargs: dict[str, Any], sinks: _Sinks) -> Completion:
        e = self.endpoint
        bounds = sse.Bounds.starting(e.shown_url, e.turn_timeout)
        stream = self._open_stream(kwargs, bounds)
        if "json" in stream.response.headers.get("content-type", ""):
            # The server ignored `stream: true` and answered with one JSON completion.
            with stream:
                try:
                    raw = bounded_json.loads(sse.body(stream.response, bounds))
                except ValueError as exc:
                    raise _unreadable(e, exc) from exc
            return self._from_completion(Fields(raw if isinstance(raw, dict) else {}), sinks)
        parts: list[str] = []
        calls: dict[int, dict[str, str | None]] = {}
        # The last usage and llama-server `timings` sent (some servers send usage on
        # several chunks, the final one counting); read once the stream ends.
        reported: Any = None
        timings: Any = None
        finish: str | None = None
        thinking: list[str] = []
        with stream:
            for chunk in _guarded(stream, self.endpoint):
                if chunk.usage is not None:
                    reported = chunk.usage
                timed = getattr(chunk, "timings", None)
                if timed is not None:
                    timings = timed
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    if delta is None:
                        continue
                    thought = _reasoning(delta)
                    if thought:
                        thinking.append(thought)
                        if sinks.reasoning:
                            sinks.reasoning(thought)
                    if delta.content:
                        parts.append(delta.content)
                        if sinks.text:
                            sinks.text(delta.content)
                    for frag in delta.tool_calls or []:
                        slot = calls.setdefault(
                            _slot_of(frag, calls), {"id": None, "name": "", "arguments": ""}
                        )
                        _assemble(slot, frag, self.endpoint)
        tool_calls = tuple(
            ToolCall(s["id"], s["name"] or "", s["arguments"] or "{}")
            for _, s in sorted(calls.items())
        )
        if not parts and not tool_calls and finish is None:
            return self._second_opinion(kwargs, sinks)
        if finish is None:
            # A reply is complete only when the server says so: llama.cpp ends a stream in
            # flight with `[DONE]` and no finish when another request arrives.
            got = sum(map(len, parts))
            raise ModelError(
                f"the server at {self.endpoint.shown_url} ended the stream before the reply "
                f"was complete (no finish reason, after {got} characters"
                f"{f' and {len(tool_calls)} tool call(s)' if tool_calls else ''})",
                hint="nothing of this turn was stored; retry (a local server may cut a "
                "stream when another request arrives)",
            )
        usage = chat_usage(reported, timings)
        return Completion("".join(parts), tool_calls, usage, finish, "".join(thinking))

    def _second_opinion(self, kwargs: dict[str, Any], sinks: _Sinks) -> Completion:
        """An empty stream (no text, no call, no finish) tells nothing: llama.cpp answers
        a streamed request over its context, or with `tool_choice`, with an empty 200. The
        same request once more without streaming gets the server's real answer: its
        refusal (raised, so overflow recovery runs), or a reply."""
        done = self._whole(kwargs, sinks)
        if not done.text and not done.tool_calls:
            raise ModelError(
                f"the server at {self.endpoint.shown_url} sent an empty reply, streamed and "
                "not (no text, no tool call)",
                hint="retry; nothing of this turn was stored. If it persists, the model or "
                "the server is misconfigured",
            )
        return done

    def list_models(self) -> list[str]:
        """The endpoint's models (`GET /models`), sorted."""
        try:
            found = self.http.get("/models")
        except Exception as exc:
            raise self._explain(exc, "") from exc
        data = found.get("data") if isinstance(found, Mapping) else None
        return sorted(str(m.get("id")) for m in data or [] if isinstance(m, Mapping))

    def _explain(self, exc: Exception, model: str) -> ModelError:
        error = self._explained(exc, model)
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            error.status = status
            body = getattr(exc, "body", None)
            found = body.get("error", body) if isinstance(body, dict) else None
            if isinstance(found, dict) and isinstance(found.get("message"), str):
                error.upstream = {k: found.get(k) for k in ("message", "type", "param", "code")}
            response = getattr(exc, "response", None)
            headers = getattr(response, "headers", None)
            wait = headers.get("retry-after") if headers is not None else None
            if isinstance(exc, HttpFailure):
                wait = exc.retry_after
            error.retry_after = wait if isinstance(wait, str) and wait.strip() else None
        return error

    def _explained(self, exc: Exception, model: str) -> ModelError:
        url = self.endpoint.shown_url
        n = self.endpoint.max_retries
        retries = f" after {n} retries" if n else ""
        if isinstance(exc, HttpFailure):
            return self._status_explained(exc, exc.status_code, model, retries)
        httpx = self.http.httpx
        if isinstance(exc, httpx.TimeoutException):
            return ModelError(
                f"{url} did not answer within {self.endpoint.timeout:g}s{retries}",
                hint="raise llm.timeout_seconds or check the server",
            )
        if isinstance(exc, httpx.HTTPError):
            return ModelError(
                f"cannot connect to {url}",
                hint="check that the server is running and that llm.base_url (or OPENAI_BASE_URL) "
                "points at it",
            )
        if isinstance(exc, ValueError):  # JSON that is not a reply, or nested too deep
            return _unreadable(self.endpoint, exc)
        raise exc

    def _status_explained(self, exc: Any, status: int, model: str, retries: str) -> ModelError:
        e = self.endpoint
        return status_error(exc, status, e.shown_url, model, e.api_key_env, retries)


def _guarded(stream: Any, endpoint: Endpoint) -> Any:
    """Iterate a stream; a failure after the answer began is a broken reply, not a refusal."""
    iterator = iter(stream)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            return
        except ModelError:
            raise  # the reply's bounds (model/sse.py): said as they are
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and status != 200:
                raise  # an error answer (not an error event mid-stream): read by the caller
            if isinstance(exc, ValueError):  # not JSON, or JSON nested too deep
                raise _unreadable(endpoint, exc) from exc
            raise ModelError(
                f"the connection to {endpoint.shown_url} broke during the reply: "
                f"{endpoint.scrub(str(exc))}",
                hint="retry; nothing of this turn was stored",
            ) from exc
        yield chunk


def _unreadable(endpoint: Endpoint, exc: Exception) -> ModelError:
    return ModelError(
        f"{endpoint.shown_url} sent a reply koog cannot read: {exc}",
        hint="nothing of this turn was stored; the server's reply is broken",
    )


def _assemble(slot: dict[str, str | None], frag: Any, endpoint: Endpoint) -> None:
    """One streamed fragment into its call, by the rule real servers follow: the id and
    the name are set by the first fragment that has them, and the same value again is not
    appended (llama.cpp repeats both in every fragment); arguments are appended."""
    if frag.id and not slot["id"]:
        slot["id"] = frag.id
    function = frag.function
    if function is None:
        return
    name = _text(function.name)
    if name and not slot["name"]:
        slot["name"] = name
    elif name and name != slot["name"]:
        raise ModelError(
            f"{endpoint.shown_url} changed a tool call's name while streaming it "
            f"({slot['name']!r}, then {name!r})",
            hint="the server streams tool calls in a way koog cannot read; try chat.stream = false",
        )
    slot["arguments"] = (slot["arguments"] or "") + _arguments(function.arguments, "")


def _slot_of(frag: Any, calls: Mapping[int, Mapping[str, str | None]]) -> int:
    """Which call a streamed fragment belongs to: its `index`; without one (Gemini sends
    each parallel call whole in a chunk of its own), a fragment naming a function starts a
    new call once the last one has its name, and anything else continues the last one."""
    index = getattr(frag, "index", None)
    if isinstance(index, int):
        return index
    last = max(calls, default=-1)
    function = getattr(frag, "function", None)
    starts = bool(_text(getattr(function, "name", None)))
    if last < 0 or (starts and calls[last].get("name")):
        return last + 1
    return last


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _arguments(value: object, empty: str = "{}") -> str:
    """Arguments as the JSON text the wire format promises, whatever the server sent."""
    if isinstance(value, str):
        return value or empty
    if value is None:
        return empty
    if isinstance(value, Fields):  # an object read from a chunk's JSON, not the SDK's
        value = value.data
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class _Sinks:
    """Where a request's deltas go as they arrive: its text, and its reasoning."""

    text: Callable[[str], None] | None
    reasoning: Callable[[str], None] | None


def _reasoning(message: Any) -> str:
    """The reasoning text a server sends beside the answer: `reasoning_content` (DeepSeek,
    vLLM, llama.cpp) or `reasoning` (newer vLLM, OpenRouter)."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


class OpenAIEmbedder:
    """Embeddings through the same endpoint's `/embeddings`, with the same error mapping."""

    def __init__(self, chat: OpenAIChatModel, model: str) -> None:
        self.chat = chat
        self.model = model

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            raw = self.chat._post("/embeddings", {"model": self.model, "input": texts})
        except ModelError:
            raise
        except Exception as exc:
            raise self.chat._explain(exc, self.model) from exc
        data = raw.get("data") if isinstance(raw, dict) else None
        items = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
        vectors = sorted(items, key=lambda d: d.get("index") or 0)
        if len(vectors) != len(texts):
            raise ModelError(
                f"{self.chat.endpoint.shown_url} returned {len(vectors)} embeddings "
                f"for {len(texts)} texts"
            )
        return [list(v.get("embedding") or []) for v in vectors]
