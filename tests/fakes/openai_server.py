"""A local OpenAI-compatible server for tests and benchmarks (stdlib only, 127.0.0.1).

Speaks the real wire format: `/v1/chat/completions` as JSON or as SSE (chunked transfer
encoding, `data: ...` events, `[DONE]`), streamed tool-call deltas, usage chunks,
`/v1/embeddings` (deterministic bag-of-words vectors) and `/v1/models`. Replies come from a scripted queue; with the queue empty it answers
"echo: <last user message>". Faults: HTTP status errors, a delay before answering, a
delay between chunks, and a connection dropped mid-stream. Every request is logged.

Scripted responses are dicts:
  {"content": "text"}                      a reply (streamed word by word when asked)
  {"chunks": ["a", "b"]}                   a reply in exactly these stream chunks
  {"tool_calls": [{"id", "name", "arguments"}], "content": ""}
  {"status": 500, "message": "boom"}       an error answer ("code" and "type" optional;
                                           "retry_after": 7 adds a Retry-After header)
  {"delay": 2.0}                           wait before answering (combine with the above)
  {"chunk_delay": 0.2}                     wait between stream chunks
  {"drop_after": 2}                        close the connection after 2 chunks
  {"json": true, "content": "text"}        a JSON completion even to a `stream: true` request
  {"finish_reason": "length", ...}         this finish reason instead of stop / tool_calls
  {"empty_stream": true}                   a stream with no content, no tool call, no finish
  a tool call with "raw": true sends its arguments as given (an object, not JSON text)
  {"deep": 3000}, {"huge_line": 41943040}, {"error_event": "text"}: JSON nested that deep
  (in the reply, its first chunk or an error body), one SSE line that long, or the stream
  broken off by an error event, on every protocol (tests/fakes/hostile.py)
`reject_stream_options = True` answers 400 to any request carrying `stream_options`;
`reject_response_formats` holds the `response_format` types answered with 400;
`context_limit` (with `context_counter`, a function of the messages, default the server's
own `count_tokens`) answers OpenAI's `context_length_exceeded` error above the limit.
Usage counts tokens with `count_tokens`, a word-piece rule of the server's own (a message
whose `content` is a list of parts counts its text parts, and MEDIA_TOKENS for each other
part; the echo reply echoes the text parts);
`embedding_faults` holds statuses, or "-inf" / "dim" for a non-finite or short vector.

A prompt cache as llama-server's (one slot, SPEC §5.4a): each answered request is a token
sequence (`prompt_tokens`, the same word pieces, with template tokens around each message),
and the tokens it shares from the start with the previous answered request's are "cached".
The figure goes out as llama-server sends it: `usage.prompt_tokens_details.cached_tokens`
and a `timings` object (`cache_n` reused, `prompt_n` computed, `predicted_n`) on the reply,
or on the stream's finish and usage chunks. `server.prompt_cache = False` reports neither
(the slot still counts). `server.cache_log` holds each answered request's
`{"prompt_tokens", "cached_tokens"}`, `server.prefilled_tokens` the tokens computed in all
(prompt minus cached, summed; llama-server's `prompt_tokens_total`); GET /_control/cache
gives both.

Quirks of real endpoints (shared/ENDPOINT_QUIRKS.md), switched on by `server.quirks` (a set
of names) or a whole profile at once (`server.use_profile(name)`, PROFILES below):
  per_turn_ids   ids numbered within each answer: `call_0_NAME`, again next turn (Kimi K3)
  constant_id    every call is `call_0` (some Grok endpoints, llama.cpp)
  name_as_id     the function's name is the id (Gemini through compatibility layers)
  repeated_id    every call of one answer has the first call's id (`edit:22` twice)
  empty_id       calls come with an empty id (several local servers)
  no_index       streamed parallel calls each in their own chunk, without `index` (Gemini)
  prefilter      a first chunk with `choices: []` and `prompt_filter_results` (Azure)
  filter_chunks  chunks whose choice has no `delta`, only `content_filter_results` (Azure)
  usage_chunks   control chunks with no `choices`, carrying only usage (Bedrock)
  stop_with_tools  `finish_reason: "stop"` although tool calls were sent (local servers)
  reasoning      `reasoning_content` deltas before the text (DeepSeek, vLLM)
  repeat_fields  every tool-call delta repeats `id`, `type` and `function.name`; only the
                 arguments come in pieces (llama.cpp's Python server)
  no_usage       `stream_options.include_usage` ignored: no usage chunk (llama.cpp)
  data_only_sse  Messages and Responses streams send `data:` lines only, no `event:` line
  empty_overflow a streamed request over `context_limit` is HTTP 200 with an empty body;
                 non-streamed it is the 400 (llama.cpp)
  empty_tool_choice  a streamed request with `tool_choice` is HTTP 200 with an empty body
  format_500     a refused `response_format` is HTTP 500, not 400 (llama.cpp's validation)
  timings_only   no `usage` at all (streamed or not), only llama-server's `timings`
The `no_usage` quirk (llama-cpp-python's server) sends no `timings` either.
A script's `{"cut_after": 2}` ends the stream after two text chunks with `data: [DONE]` and no
finish chunk, as llama.cpp does to a stream in flight when another request arrives.
Like strict servers, every request holding two tool calls with one id is answered 400
"duplicate tool_call_id" (`strict_ids = False` turns that off).

Run standalone: `python -m tests.fakes.openai_server --port 8080`; POST a JSON list of
responses to /_control/enqueue, GET /_control/requests for the log.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import hashlib
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes import hostile
from tests.fakes.native_upstreams import (
    MessagesCache,
    answer_messages,
    answer_responses,
    item_text,
    items_of,
)


class _Listening(ThreadingHTTPServer):
    """A real server's backlog: a burst of connections (a test sends 140 at once) waits to
    be accepted instead of overflowing the standard library's five."""

    request_queue_size = 1024


class FakeOpenAIServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.queue: collections.deque[dict[str, Any]] = collections.deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.default_delay = 0.0
        # With the queue empty, a responder (request body -> script) decides, else echo.
        self.responder: Any = None
        self.embedding_faults: collections.deque[int | str] = collections.deque()
        self.reject_stream_options = False
        self.reject_response_formats: set[str] = set()
        self.context_limit: int | None = None
        self.context_counter: Any = None
        self.embedding_size = EMBEDDING_SIZE
        self.quirks: set[str] = set()
        self.strict_ids = True
        self.prompt_cache = True
        self.slot: list[tuple[str, ...]] | None = None  # the last answered request's tokens
        self.cache_log: list[dict[str, int]] = []
        self.native_log: list[dict[str, Any]] = []  # Messages and Responses (native_upstreams.py)
        self.messages_cache = MessagesCache()
        self.stored_responses: dict[str, list[dict[str, Any]]] = {}
        self.items_slot: list[tuple[str, ...]] | None = None
        self.models = ["test-model"]  # the ids /v1/models lists
        handler = type("Handler", (_Handler,), {"fake": self})
        self.httpd = _Listening((host, port), handler)
        self.httpd.daemon_threads = True
        # Dropped connections are a scripted fault here, not something to print.
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def enqueue(self, *responses: dict[str, Any]) -> None:
        with self.lock:
            self.queue.extend(responses)

    def reset(self) -> None:
        with self.lock:
            self.queue.clear()
            self.requests.clear()
            self.responder = None
            self.embedding_faults.clear()
            self.reject_stream_options = False
            self.reject_response_formats = set()
            self.context_limit = None
            self.context_counter = None
            self.quirks = set()
            self.strict_ids = True
            self.default_delay = 0.0
            self.prompt_cache = True
            self.slot = None
            self.cache_log = []
            self.native_log = []
            self.messages_cache = MessagesCache()
            self.stored_responses = {}
            self.items_slot = None
            self.models = ["test-model"]

    def use_profile(self, name: str) -> None:
        """Behave like one kind of real endpoint (PROFILES)."""
        with self.lock:
            self.quirks = set(PROFILES[name])

    def next_response(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(body)
            if self.queue:
                return self.queue.popleft()
            if self.responder is not None:
                return dict(self.responder(body))
        messages = body.get("messages")
        if messages is None and "input" in body:  # the Responses API's items
            messages = [
                {"role": i.get("role"), "content": item_text(i)} for i in items_of(body["input"])
            ]
        last_user = next(
            (
                text_of(m.get("content"))
                for m in reversed(messages or [])
                if m.get("role") == "user"
            ),
            "",
        )
        return {"content": f"echo: {last_user}"}

    def prefill(self, messages: list[dict[str, Any]]) -> dict[str, int]:
        """Answer a request from the slot: its prompt size, and how much of it the previous
        answered request left in the cache; the slot then holds this request."""
        tokens = prompt_tokens(messages)
        total = 2 + sum(map(len, tokens))
        with self.lock:
            shared = 0 if self.slot is None else common_prefix(self.slot, tokens)
            # llama-server computes at least the last token again, to have logits.
            cached = min(shared, total - 1)
            self.slot = tokens
            figures = {"prompt_tokens": total, "cached_tokens": cached}
            self.cache_log.append(figures)
        return figures

    def prefill_items(self, tokens: list[tuple[str, ...]]) -> dict[str, int]:
        """The Responses API's automatic prefix cache, one slot (called holding the lock)."""
        total = sum(map(len, tokens))
        shared = 0 if self.items_slot is None else common_prefix(self.items_slot, tokens)
        self.items_slot = tokens
        return {"prompt_tokens": total, "cached_tokens": min(shared, max(total - 1, 0))}

    @property
    def prefilled_tokens(self) -> int:
        """Prompt tokens computed (not served from the cache), over every answered request."""
        with self.lock:
            return sum(r["prompt_tokens"] - r["cached_tokens"] for r in self.cache_log)

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r.get("_path", "").endswith("/embeddings")]

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r.get("_path", "").endswith("/chat/completions")]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = hostile.spliced(json.dumps(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.endswith("/models"):
            listed = [{"id": m, "object": "model"} for m in self.fake.models]
            self._json(200, {"object": "list", "data": listed})
        elif self.path == "/_control/requests":
            with self.fake.lock:
                self._json(200, list(self.fake.requests))
        elif self.path == "/_control/native":
            with self.fake.lock:
                self._json(200, list(self.fake.native_log))
        elif self.path == "/_control/cache":
            prefilled = self.fake.prefilled_tokens
            with self.fake.lock:
                self._json(200, {"prefilled_tokens": prefilled, "requests": self.fake.cache_log})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._json(400, {"error": {"message": "invalid JSON body", "type": "invalid_request"}})
            return
        if self.path == "/_control/enqueue":
            self.fake.enqueue(*body)
            self._json(200, {"queued": len(body)})
            return
        if self.path.endswith("/embeddings"):
            self._embeddings(body)
            return
        if self.path.split("?")[0].endswith("/v1/messages"):  # Claude Code adds ?beta=true
            answer_messages(self, body)
            return
        if self.path.endswith("/v1/responses"):
            answer_responses(self, body)
            return
        if not self.path.endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        body["_path"] = self.path
        if self.fake.reject_stream_options and "stream_options" in body:
            with self.fake.lock:
                self.fake.requests.append(body)
            message = "Unrecognized request argument supplied: stream_options"
            self._json(400, {"error": {"message": message, "type": "invalid_request_error"}})
            return
        refusal = self._refusal(body) or self._duplicate_ids(body)
        quirks = self.fake.quirks
        if body.get("stream") and (
            (
                refusal is not None
                and refusal.get("code") == "context_length_exceeded"
                and "empty_overflow" in quirks
            )
            or ("empty_tool_choice" in quirks and body.get("tool_choice") is not None)
        ):
            with self.fake.lock:
                self.fake.requests.append(body)
            self._empty_ok()
            return
        if refusal is not None:
            with self.fake.lock:
                self.fake.requests.append(body)
            status = (
                500 if refusal.get("param") == "response_format" and "format_500" in quirks else 400
            )
            self._json(status, refusal.get("_body") or {"error": refusal})
            return
        script = self.fake.next_response(body)
        time.sleep(float(script.get("delay", self.fake.default_delay)))
        if "status" in script:
            status = int(script["status"])
            message = script.get("message", f"scripted error {status}")
            error = {
                "message": message,
                "type": script.get("type", "scripted"),
                "code": script.get("code", status),
            }
            if "deep" in script:
                error["details"] = hostile.deep(script["deep"])
            wait = {"retry-after": str(script["retry_after"])} if "retry_after" in script else {}
            self._json(status, {"error": error}, {"retry-after-ms": "10", **wait})
            return
        figures = self.fake.prefill(body.get("messages", []))
        if body.get("stream") and not script.get("json"):
            self._stream(body, script, figures)
        else:
            self._whole(body, script, figures)

    def _empty_ok(self) -> None:
        """HTTP 200 with an empty event stream: what llama.cpp answers some streams."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")  # closed after it: never reused
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True

    def _refusal(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """What a real server refuses before answering: a response_format it lacks, or a
        request longer than the model's context (OpenAI's error shape)."""
        kind = (body.get("response_format") or {}).get("type")
        if kind in self.fake.reject_response_formats:
            return {
                "message": f"Invalid parameter: 'response_format' of type '{kind}' is not "
                "supported with this model.",
                "type": "invalid_request_error",
                "param": "response_format",
                "code": None,
            }
        limit = self.fake.context_limit
        if limit is None:
            return None
        used = (self.fake.context_counter or count_tokens)(body.get("messages", []))
        if used <= limit:
            return None
        for quirk, words in OVERFLOW_WORDS.items():
            if quirk in self.fake.quirks:
                return {"_body": words(used, limit)}
        return {
            "message": f"This model's maximum context length is {limit} tokens. However, your "
            f"messages resulted in {used} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }

    def _duplicate_ids(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """What strict servers say to a request naming one tool-call id twice."""
        if not self.fake.strict_ids:
            return None
        seen: set[str] = set()
        for message in body.get("messages", []):
            for call in message.get("tool_calls") or []:
                call_id = call.get("id") or ""
                if not call_id or call_id in seen:
                    return {
                        "message": f"Duplicate value for 'tool_call_id' of {call_id!r} in "
                        "messages: each tool call needs an id of its own.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": None,
                    }
                seen.add(call_id)
        return None

    def _embeddings(self, body: dict[str, Any]) -> None:
        body["_path"] = self.path
        with self.fake.lock:
            self.fake.requests.append(body)
            fault = self.fake.embedding_faults.popleft() if self.fake.embedding_faults else None
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        if fault in ("-inf", "dim"):
            bad = [float("-inf"), *embed(texts[0])[1:]] if fault == "-inf" else [0.5] * 32
            vectors = [bad, *(embed(t) for t in texts[1:])]
            data = [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ]
            self._json(200, {"object": "list", "data": data, "model": body.get("model", "")})
            return
        if fault is not None:
            self._json(
                int(fault),
                {"error": {"message": f"scripted error {fault}", "type": "scripted"}},
                {"retry-after-ms": "10"},
            )
            return
        data = [
            {"object": "embedding", "index": i, "embedding": embed(t, self.fake.embedding_size)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(t.split()) for t in texts)
        self._json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "test-embed"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _reported(self, content: str, figures: dict[str, int]) -> tuple[Any, Any]:
        """The usage and `timings` objects of an answer (None: not sent), by the quirks."""
        quirks, cache = self.fake.quirks, self.fake.prompt_cache
        usage = _usage(figures, content, cache) if "timings_only" not in quirks else None
        timings = _timings(figures, content) if cache and "no_usage" not in quirks else None
        return usage, timings

    def _whole(self, body: dict[str, Any], script: dict[str, Any], figures: dict[str, int]) -> None:
        content = script.get("content", "".join(script.get("chunks", [])))
        calls = _quirky_ids(_wire_calls(script.get("tool_calls", [])), self.fake.quirks)
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:
            message["tool_calls"] = calls
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test-model"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": script.get("finish_reason")
                    or _finish(calls, self.fake.quirks),
                }
            ],
        }
        if "deep" in script:
            answer["choices"][0]["logprobs"] = {"content": hostile.deep(script["deep"])}
        usage, timings = self._reported(content, figures)
        if usage is not None:
            answer["usage"] = usage
        if timings is not None:
            answer["timings"] = timings
        self._json(200, answer)

    def _stream(
        self, body: dict[str, Any], script: dict[str, Any], figures: dict[str, int]
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "test-model"),
        }
        quirks = self.fake.quirks
        events = [] if script.get("empty_stream") else list(_events(script, quirks))
        delay = float(script.get("chunk_delay", 0))
        drop_after = script.get("drop_after")
        cut_after = script.get("cut_after")
        if cut_after is not None:  # the text chunks before it, then [DONE] and no finish
            events = [e for e in events if e[1] is None][: int(cut_after) + 1]
        content = script.get("content", "".join(script.get("chunks", [])))
        usage, timings = self._reported(content, figures)
        try:
            for index, (delta, finish) in enumerate(events):
                if drop_after is not None and index >= int(drop_after):
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    self.close_connection = True
                    return
                if delta is None:  # a quirk's own chunk, sent as it is
                    self._event(json.dumps({**base, **finish}))
                    continue
                chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                if finish is not None and timings is not None:  # as llama-server's last chunk
                    chunk["timings"] = timings
                if index == 0 and "deep" in script:
                    chunk["choices"][0]["logprobs"] = {"content": hostile.deep(script["deep"])}
                if finish is not None and self._hostile(base, script):
                    return
                self._event(json.dumps(chunk))
                if delay and finish is None:
                    time.sleep(delay)
            if (body.get("stream_options") or {}).get("include_usage") and (
                "no_usage" not in quirks and cut_after is None and usage is not None
            ):
                closing = {**base, "choices": [], "usage": usage}
                if timings is not None:
                    closing["timings"] = timings
                self._event(json.dumps(closing))
            self._event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _event(self, data: str) -> None:
        payload = f"data: {hostile.spliced(data)}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _hostile(self, base: dict[str, Any], script: dict[str, Any]) -> bool:
        """Before the finish chunk: a huge line, or an error event ending the stream
        (OpenAI's mid-stream error: a chunk holding only `error`). True: the stream ended."""
        if "huge_line" in script:
            head = json.dumps({**base, "choices": [{"index": 0, "delta": {"content": ""}}]})
            cut = head.index('"content": ""') + len('"content": "')
            for piece in hostile.huge_data(head[:cut], int(script["huge_line"]), head[cut:]):
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        if "error_event" not in script:
            return False
        error = {"message": script["error_event"], "type": "server_error", "code": None}
        self._event(json.dumps({"error": error}))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        return True


EMBEDDING_SIZE = 64


def embed(text: str, size: int = EMBEDDING_SIZE) -> list[float]:
    """A deterministic bag-of-words embedding: texts sharing words point the same way."""
    vector = [0.0] * size
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % size] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _events(script: dict[str, Any], quirks: Collection[str] = ()) -> Any:
    """(delta, finish_reason) pairs; (None, chunk fields) for a quirk's chunk of its own."""
    if "prefilter" in quirks:
        yield None, {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]}
    yield {"role": "assistant", "content": ""}, None
    if "reasoning" in quirks:
        yield {"reasoning_content": "Let me think about this. "}, None
        yield {"reasoning_content": "The answer follows."}, None
    chunks = script.get("chunks")
    if chunks is None:
        text = script.get("content", "")
        words = text.split(" ")
        chunks = (
            [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if text else []
        )
    for piece in chunks:
        yield {"content": piece}, None
        if "filter_chunks" in quirks:
            filtered = {"hate": {"filtered": False, "severity": "safe"}}
            yield None, {"choices": [{"index": 0, "content_filter_results": filtered}]}
        if "usage_chunks" in quirks:
            yield None, {"usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    calls = _quirky_ids(_wire_calls(script.get("tool_calls", [])), quirks)
    for index, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        if not isinstance(arguments, str):  # {"raw": true}: sent as the server gave it
            yield (
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": call["function"],
                        }
                    ]
                },
                None,
            )
            continue
        if "no_index" in quirks:  # each call whole, in a chunk of its own, with no index
            yield {"tool_calls": [{"id": call["id"], **call}]}, None
            continue
        if "repeat_fields" in quirks:  # id, type and name again in every piece
            thirds = [
                arguments[i * len(arguments) // 3 : (i + 1) * len(arguments) // 3] for i in range(3)
            ]
            for part in thirds:
                yield (
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": part},
                            }
                        ]
                    },
                    None,
                )
            continue
        half = len(arguments) // 2
        yield (
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            },
            None,
        )
        for part in (arguments[:half], arguments[half:]):
            yield {"tool_calls": [{"index": index, "function": {"arguments": part}}]}, None
    yield {}, script.get("finish_reason") or _finish(calls, quirks)


def _finish(calls: list[dict[str, Any]], quirks: Collection[str]) -> str:
    return "tool_calls" if calls and "stop_with_tools" not in quirks else "stop"


def _quirky_ids(calls: list[dict[str, Any]], quirks: Collection[str]) -> list[dict[str, Any]]:
    """The ids a real endpoint of these quirks would give the calls of one answer."""
    for index, call in enumerate(calls):
        name = call["function"]["name"]
        if "per_turn_ids" in quirks:
            call["id"] = f"call_{index}_{name}"
        elif "constant_id" in quirks:
            call["id"] = "call_0"
        elif "name_as_id" in quirks:
            call["id"] = name
        elif "repeated_id" in quirks:
            call["id"] = calls[0]["id"]
        elif "empty_id" in quirks:
            call["id"] = ""
    return calls


# Each local server's refusal of a request longer than its context, as it sends it (README,
# Local models); the bodies below are the error objects, `_refusal`'s shape.
OVERFLOW_WORDS: dict[str, Callable[[int, int], dict[str, Any]]] = {
    # llama.cpp's llama-server (as bench/build_llama_server.sh builds it; seen there)
    "overflow_llama_server": lambda used, limit: {
        "error": {
            "code": 400,
            "message": f"request ({used} tokens) exceeds the available context size ({limit} "
            "tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": used,
            "n_ctx": limit,
        }
    },
    # Ollama with truncation off: a bare string
    "overflow_ollama": lambda used, limit: {"error": "the input length exceeds the context length"},
    # LM Studio (its llama.cpp engine): a bare string too
    "overflow_lmstudio": lambda used, limit: {
        "error": f"Trying to keep the first {used} tokens when context the overflows. However, "
        f"the model is loaded with context length of only {limit} tokens, which is not enough. "
        "Try to load the model with a larger context length, or provide a shorter input"
    },
    # vLLM's OpenAI server: its ErrorResponse at the top level
    "overflow_vllm": lambda used, limit: {
        "object": "error",
        "message": f"This model's maximum context length is {limit} tokens. However, you "
        f"requested {used + 16} tokens ({used} in the messages, 16 in the completion). Please "
        "reduce the length of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
}


# Kinds of real endpoint, each a set of quirks (ENDPOINT_QUIRKS.md). Tests about tool
# calls, rollback, resume or streaming run under each profile that could change them.
PROFILES: dict[str, frozenset[str]] = {
    "reference": frozenset(),
    "per-turn-ids": frozenset({"per_turn_ids"}),
    "constant-id": frozenset({"constant_id", "stop_with_tools"}),
    "name-as-id": frozenset({"name_as_id", "no_index"}),
    "repeated-id": frozenset({"repeated_id"}),
    "no-id": frozenset({"empty_id", "reasoning"}),
    "azure": frozenset({"prefilter", "filter_chunks"}),
    "bedrock": frozenset({"usage_chunks"}),
    # llama-cpp-python 0.3.36's server (ENDPOINT_QUIRKS.md): one constant id, fields
    # repeated in every tool-call delta, no usage, empty 200s, validation errors as 500s.
    "llamacpp": frozenset(
        {"constant_id", "repeat_fields", "no_usage", "empty_overflow", "format_500"}
    ),
    # Local servers by their overflow refusal (OVERFLOW_WORDS).
    "llama-server": frozenset({"overflow_llama_server", "constant_id"}),
    "ollama": frozenset({"overflow_ollama"}),
    "lm-studio": frozenset({"overflow_lmstudio"}),
    "vllm": frozenset({"overflow_vllm", "reasoning"}),
}
OVERFLOW_PROFILES = ("reference", "llama-server", "ollama", "lm-studio", "vllm")
# The profiles whose tool-call ids differ from the reference's.
ID_PROFILES = (
    "reference",
    "per-turn-ids",
    "constant-id",
    "name-as-id",
    "repeated-id",
    "no-id",
    "llamacpp",
)


def _wire_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for call in calls:
        arguments = call.get("arguments", {})
        if not call.get("raw") and not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        out.append(
            {
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments},
            }
        )
    return out


_WORD_PIECES = re.compile(r"\w{1,6}|[^\w\s]|\n")


def text_tokens(text: str) -> int:
    """The server's own tokenizer: word pieces of up to six characters (a piece outside
    ASCII costs one more), each symbol and line break one. koog does not share it."""
    return sum(1 + (not piece.isascii()) for piece in _WORD_PIECES.findall(text))


# Each part that is not text (an image, audio, a file) costs this flat amount, as OpenAI
# charges a low-detail image, whatever the size of its data.
MEDIA_TOKENS = 85


def text_of(content: object) -> str:
    """A message's text: `content` as a string, or its text parts joined (a list of parts)."""
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content or "")


def count_tokens(messages: list[dict[str, Any]]) -> int:
    total = 2
    for m in messages:
        content = m.get("content")
        total += 3 + text_tokens(text_of(content))
        if isinstance(content, list):
            total += MEDIA_TOKENS * sum(
                1 for p in content if not (isinstance(p, dict) and p.get("type") == "text")
            )
        for call in m.get("tool_calls") or []:
            function = call.get("function") or {}
            total += text_tokens(f"{function.get('name', '')} {function.get('arguments', '')}")
    return total


def _usage(figures: dict[str, int], content: str, cache: bool) -> dict[str, Any]:
    prompt = figures["prompt_tokens"]
    completion = text_tokens(content)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cache:
        usage["prompt_tokens_details"] = {"cached_tokens": figures["cached_tokens"]}
    return usage


def _timings(figures: dict[str, int], content: str) -> dict[str, Any]:
    """llama-server's `timings`: `cache_n` tokens reused, `prompt_n` computed."""
    cached = figures["cached_tokens"]
    return {
        "cache_n": cached,
        "prompt_n": figures["prompt_tokens"] - cached,
        "prompt_ms": 0.0,
        "predicted_n": text_tokens(content),
        "predicted_ms": 0.0,
    }


def prompt_tokens(messages: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """A request's prompt as the server's tokens, one tuple per message (the template's
    start, role and end tokens around the message's pieces): with the opening token and
    the closing generation prompt, `count_tokens(messages)` of them in all. A message is
    tokenised once (memoised), so the same message is the same tuple object."""
    out = []
    for m in messages:
        content = m.get("content")
        media: tuple[str, ...] = ()
        if isinstance(content, list):
            media = tuple(
                json.dumps(p, sort_keys=True)
                for p in content
                if not (isinstance(p, dict) and p.get("type") == "text")
            )
        calls = tuple(
            f"{(c.get('function') or {}).get('name', '')} {(c.get('function') or {}).get('arguments', '')}"
            for c in m.get("tool_calls") or []
        )
        out.append(_message_tokens(str(m.get("role", "")), text_of(content), media, calls))
    return out


@functools.lru_cache(maxsize=65536)
def _message_tokens(
    role: str, text: str, media: tuple[str, ...], calls: tuple[str, ...]
) -> tuple[str, ...]:
    tokens = ["<|start|>", role, *_pieces(text)]
    for part in media:  # MEDIA_TOKENS each, all telling the part's bytes apart
        digest = hashlib.sha256(part.encode()).hexdigest()[:16]
        tokens.extend(f"<media:{digest}:{i}>" for i in range(MEDIA_TOKENS))
    for call in calls:
        tokens.extend(_pieces(call))
    tokens.append("<|end|>")
    return tuple(tokens)


def _pieces(text: str) -> list[str]:
    """`text_tokens(text)` tokens: each word piece, and a second token after a non-ASCII one."""
    out = []
    for piece in _WORD_PIECES.findall(text):
        out.append(piece)
        if not piece.isascii():
            out.append("<|+|>")
    return out


def common_prefix(before: list[tuple[str, ...]], now: list[tuple[str, ...]]) -> int:
    """How many tokens two prompts share from the start: whole messages compared at once
    (the same message is the same tuple), then the first that differs token by token."""
    shared = 1  # the opening token
    for a, b in zip(before, now, strict=False):
        if a is b or a == b:
            shared += len(a)
            continue
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            shared += 1
        return shared
    if len(before) == len(now):
        shared += 1  # the same messages: the generation prompt too
    return shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before every answer")
    args = parser.parse_args()
    server = FakeOpenAIServer(port=args.port)
    server.default_delay = args.delay
    print(f"serving {server.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.httpd.serve_forever()


if __name__ == "__main__":
    main()
