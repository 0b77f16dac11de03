"""ChatModel over the `openai` package, for any OpenAI-compatible endpoint.

Streams text deltas to a callback, reassembles streamed tool-call fragments by index, and
reports usage, with the prompt tokens the server's cache served wherever it says so
(cache_figures.py: the usage's details, or llama-server's `timings`). Retries and timeouts
are the client's own (`max_retries`, `timeout`). Every API failure becomes one ModelError
naming what to check; request headers (the key) are never logged or shown.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koogcli.adapters.model import sse
from koogcli.adapters.model.cache_figures import chat_usage
from koogcli.adapters.model.forwarding import Fields
from koogcli.adapters.model.native_http import HttpFailure
from koogcli.adapters.model.refusals import error_detail, status_error
from koogcli.core import bounded_json, content_parts
from koogcli.core.errors import (
    EndpointNotConfiguredError,
    ModelError,
)
from koogcli.core.messages import Message, ToolCall
from koogcli.core.model_port import Completion, ModelRequest
from koogcli.core.urls import masked

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# The key a client is given when none is configured (local servers need none).
NO_KEY = "not-needed"


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str
    api_key_env: str
    timeout: float
    max_retries: int
    # `[llm] turn_timeout_seconds`: how long one reply may take from its request to its end
    # (None: only `timeout` bounds each read).
    turn_timeout: float | None = None

    @property
    def shown_url(self) -> str:
        """The base URL for messages: credentials inside it are never printed."""
        return masked(self.base_url)

    def scrub(self, text: str) -> str:
        """Text from a library exception, with the URL's credentials masked."""
        return text.replace(self.base_url, self.shown_url) if self.base_url else text


@dataclass(frozen=True)
class RequestOptions:
    """Request fields from config; unset ones are never sent (servers differ in what they take)."""

    max_tokens: int | None = None
    reasoning_effort: str | None = None
    extra_body: Mapping[str, object] = field(default_factory=dict)


def resolve_endpoint(
    base_url: str,
    api_key_env: str,
    env: Mapping[str, str],
    timeout: float,
    max_retries: int,
    turn_timeout: float | None = None,
) -> Endpoint:
    """The key is read here, when the client is built, and nowhere else (§5.8)."""
    key = env.get(api_key_env, "")
    if not key and not base_url:
        raise EndpointNotConfiguredError(f"no API key in {api_key_env} and no base URL")
    # Local servers usually need no key, but the client insists on one.
    url = base_url or OPENAI_DEFAULT_URL
    return Endpoint(url, key or NO_KEY, api_key_env, timeout, max_retries, turn_timeout)


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


class OpenAIChatModel:
    def __init__(
        self, endpoint: Endpoint, options: RequestOptions | None = None, forward: bool = False
    ) -> None:
        self.endpoint = endpoint
        self.options = options or RequestOptions()
        # `koog serve`: streamed requests go out as bytes over the SDK's connection pool and
        # come back as plain JSON chunks (forwarding.py), not through the SDK's models.
        # `koog chat`: streamed requests go out without the SDK at all (lean_stream.py).
        self.forward = forward
        self._forwarder: Any = None
        self._lean: Any = None
        self._sdk: Any = None
        # serve's worker threads share one model: the client is made once (a second one
        # made beside it would be collected, closing its pool under a reply in flight).
        self._made = threading.RLock()
        # Set once the server rejected `stream_options`; one model serves a whole process.
        self.stream_options = True

    @property
    def _client(self) -> Any:
        """The SDK's client, made (and the SDK imported) when first needed."""
        with self._made:
            if self._sdk is None:
                import openai

                endpoint = self.endpoint
                self._sdk = openai.OpenAI(
                    base_url=endpoint.base_url,
                    api_key=endpoint.api_key,
                    timeout=endpoint.timeout,
                    max_retries=endpoint.max_retries,
                )
            return self._sdk

    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        # The messages are already in wire shape. Passing them as `extra_body` (which the
        # client merges over the typed fields) skips the client's per-field transform, which
        # costs over a second on a 10,000-message history.
        body: dict[str, Any] = {**self.options.extra_body, **request.extra}
        body["messages"] = [message_to_wire(m) for m in request.messages]
        kwargs: dict[str, Any] = {"model": request.model, "messages": [], "extra_body": body}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if self.options.max_tokens is not None:
            kwargs["max_tokens"] = self.options.max_tokens
        if self.options.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.options.reasoning_effort
        if request.tools:
            kwargs["tools"] = list(request.tools)
        if request.response_format is not None:
            kwargs["response_format"] = request.response_format
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
        return self._from_completion(self._client.chat.completions.create(**kwargs), sinks)

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
        except Exception as exc:  # the SDK's status error, or lean_stream's HttpFailure
            status = getattr(exc, "status_code", None)
            said = f"{getattr(exc, 'message', '')} {error_detail(exc)}"
            if status not in (400, 422) or "stream_options" not in said:
                raise
            stream = self._post_stream(kwargs, False, bounds)
            self.stream_options = False
            return stream

    def _post_stream(self, kwargs: dict[str, Any], usage: bool, bounds: sse.Bounds) -> Any:
        asked: dict[str, Any] = {"stream_options": {"include_usage": True}} if usage else {}
        if not self.forward:
            with self._made:
                if self._lean is None:
                    from koogcli.adapters.model.lean_stream import LeanPoster

                    e = self.endpoint
                    self._lean = LeanPoster(e.base_url, e.api_key, e.timeout, e.max_retries)
            body = {k: v for k, v in kwargs.items() if k != "extra_body"}
            body.update(kwargs["extra_body"], stream=True, **asked)
            return self._lean.open(body, bounds)
        with self._made:
            if self._forwarder is None:
                from koogcli.adapters.model.forwarding import Forwarder

                self._forwarder = Forwarder(self._client)
        # The body the SDK would send: the typed fields, `extra_body` merged over them.
        body = {k: v for k, v in kwargs.items() if k != "extra_body"}
        body.update(kwargs["extra_body"], stream=True, **asked)
        return self._forwarder.open(body, self.endpoint.max_retries, bounds)

    def _stream(self, kwargs: dict[str, Any], sinks: _Sinks) -> Completion:
        e = self.endpoint
        bounds = sse.Bounds.starting(e.shown_url, e.turn_timeout)
        stream = self._open_stream(kwargs, bounds)
        if "json" in stream.response.headers.get("content-type", ""):
            # The server ignored `stream: true` and answered with one JSON completion.
            from openai.types.chat import ChatCompletion

            with stream:
                try:
                    raw = bounded_json.loads(sse.body(stream.response, bounds))
                except ValueError as exc:
                    raise _unreadable(e, exc) from exc
            return self._from_completion(ChatCompletion.model_validate(raw), sinks)
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
            return sorted(m.id for m in self._client.models.list())
        except Exception as exc:
            raise self._explain(exc, "") from exc

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
        if isinstance(exc, HttpFailure):  # a streamed request of `koog chat`, SDK-less
            return self._status_explained(exc, exc.status_code, model, retries)
        lean = self._lean.http.httpx if self._lean is not None else None
        if lean is not None and isinstance(exc, lean.TimeoutException):
            return ModelError(
                f"{url} did not answer within {self.endpoint.timeout:g}s{retries}",
                hint="raise llm.timeout_seconds or check the server",
            )
        if lean is not None and isinstance(exc, lean.HTTPError):
            return ModelError(
                f"cannot connect to {url}",
                hint="check that the server is running and that llm.base_url (or OPENAI_BASE_URL) "
                "points at it",
            )
        import openai

        if isinstance(exc, openai.APIStatusError):
            return self._status_explained(exc, exc.status_code, model, retries)
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(
                f"{url} did not answer within {self.endpoint.timeout:g}s{retries}",
                hint="raise llm.timeout_seconds or check the server",
            )
        if isinstance(exc, openai.APIConnectionError):
            return ModelError(
                f"cannot connect to {url}",
                hint="check that the server is running and that llm.base_url (or OPENAI_BASE_URL) "
                "points at it",
            )
        if isinstance(exc, (openai.OpenAIError, json.JSONDecodeError)):
            return ModelError(f"{url}: {type(exc).__name__}: {self.endpoint.scrub(str(exc))}")
        if isinstance(exc, RecursionError):  # the SDK parsed JSON nested past the stack
            return _unreadable(self.endpoint, bounded_json.TooDeepError(bounded_json.MAX_DEPTH))
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
            response = self.chat._client.embeddings.create(model=self.model, input=texts)
        except Exception as exc:
            raise self.chat._explain(exc, self.model) from exc
        vectors = sorted(response.data, key=lambda d: d.index)
        if len(vectors) != len(texts):
            raise ModelError(
                f"{self.chat.endpoint.shown_url} returned {len(vectors)} embeddings "
                f"for {len(texts)} texts"
            )
        return [list(v.embedding) for v in vectors]
