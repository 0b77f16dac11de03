"""The summary requests of a compression: sent through the chat model, several at once and
in order (ModelSummarizer), each fitted to a known context (its room, a brief instruction
in a small one), an answer that is no whole summary refused (SPEC §5.19)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from koogcli.core import compression as core
from koogcli.core.errors import ModelError, ResponseFormatError
from koogcli.core.messages import Message, assistant, user
from koogcli.core.model_port import Completion, ModelRequest
from koogcli.core.tokens import request_tokens
from koogcli.services.budget import context_limit
from koogcli.services.context import AppContext

Progress = Callable[[int, int], None]
Q = TypeVar("Q")
A = TypeVar("A")


def _not_a_summary(done: Completion) -> str | None:
    if done.tool_calls:
        names = ", ".join(c.name or "?" for c in done.tool_calls)
        return f"a tool call ({names}) instead of text"
    if not done.text.strip():
        return "no text"
    if done.finish_reason in ("length", "content_filter"):
        cut = "the length limit" if done.finish_reason == "length" else "a content filter"
        return f"a text cut off by {cut}"
    return None


FORMATS = ("json_schema", "json_object", "plain")
BRIEF_BELOW = 2048  # a context this small gets the brief summary instruction


class ModelSummarizer:
    """Sends summary requests through the model, `concurrency` at a time, in order.

    Questions with a JSON answer go out with `response_format` json_schema; a server that
    refuses it is asked with json_object, then with the plain prompt, and this process
    keeps asking it that way. An answer that does not parse is asked again with what was
    wrong, up to `compression.retries` times."""

    def __init__(
        self,
        ctx: AppContext,
        concurrency: int,
        progress: Progress | None = None,
        model: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.model = model or ctx.settings.llm.model
        self.concurrency = concurrency
        self.progress = progress
        self.requests = 0
        self.problems: list[str] = []
        self._format = 0  # index into FORMATS, lowered when the server refuses one
        self._lock = threading.Lock()

    def _send(self, prompt: Sequence[Message], response_format: dict[str, object] | None) -> str:
        return self._complete(prompt, response_format).text

    def _complete(
        self, prompt: Sequence[Message], response_format: dict[str, object] | None
    ) -> Completion:
        llm = self.ctx.settings.llm
        budget = {"max_tokens": summary_room(self.ctx, self.model, prompt)}
        request = ModelRequest(
            self.model,
            list(prompt),
            llm.temperature,
            stream=False,
            response_format=response_format,
            extra=budget,
        )
        with self._lock:
            self.requests += 1
        return self.ctx.model().complete(request)

    def _one(self, prompt: Sequence[Message]) -> str:
        """One summary: text, whole. An answer that is empty, a tool call, or cut short
        is no summary, and storing it would lose what it replaces (SPEC §5.19). The
        request says how long it may be (small local models otherwise run on to the
        token limit), and an answer cut off there is asked for once more, shorter."""
        prompt = instructed(prompt, context_limit(self.ctx, self.model))
        words = summary_room(self.ctx, self.model, prompt) * 3 // 5
        *head, last = prompt
        for budget in (words, words // 4):  # once more, shorter, after a cut-off answer
            asked = [*head, last.with_content(f"{last.text}\nWrite at most {budget} words.")]
            done = self._complete(asked, None)
            if done.finish_reason != "length" or done.tool_calls or not done.text.strip():
                break
        why = _not_a_summary(done)
        if why is not None:
            raise NoSummaryError(
                f"the summary request was answered with {why}; nothing was changed",
                hint="try again, or another model with -m (compression.model)",
                cut_off=done.finish_reason == "length" and not done.tool_calls,
            )
        return done.text

    def _answer(self, question: core.Question, prompt: Sequence[Message]) -> str:
        while True:
            tried = self._format
            response_format = _response_format(FORMATS[tried], question)
            try:
                return self._send(prompt, response_format)
            except ResponseFormatError:
                if response_format is None:
                    raise
                with self._lock:
                    self._format = max(self._format, tried + 1)

    def _one_parsed(self, question: core.Question) -> object | None:
        prompt = list(question.messages)
        retries = self.ctx.settings.compression.retries
        for attempt in range(retries + 1):
            text = self._answer(question, prompt)
            try:
                return question.parse(text)
            except core.InvalidAnswer as why:
                if attempt == retries:
                    with self._lock:
                        self.problems.append(
                            f"no valid answer for {question.name} after {attempt + 1} "
                            f"requests: {why}"
                        )
                    return None
                prompt += [
                    assistant(text),
                    user(f"That answer is not valid: {why}. Answer again with the JSON only."),
                ]
        return None

    def ask_all(self, prompts: Sequence[Sequence[Message]]) -> list[str]:
        return self._all(self._one, prompts)

    def ask_parsed(self, questions: Sequence[core.Question]) -> list[object | None]:
        return self._all(self._one_parsed, questions)

    def _all(self, ask: Callable[[Q], A], items: Sequence[Q]) -> list[A]:
        total = len(items)
        if self.progress:
            self.progress(0, total)
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, total)))
        futures: list[Future[A]] = [pool.submit(ask, item) for item in items]
        try:
            done_count = 0
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # raises the first failure: the compression is aborted
                done_count += len(done)
                if self.progress:
                    self.progress(done_count, total)
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


def _response_format(kind: str, question: core.Question) -> dict[str, object] | None:
    if kind == "json_schema":
        schema = {"name": question.name, "schema": question.schema, "strict": True}
        return {"type": "json_schema", "json_schema": schema}
    return {"type": "json_object"} if kind == "json_object" else None


class NoSummaryError(ModelError):
    """The model answered a summary request with no usable summary (nothing, a tool
    call, a cut-off text): the compression changes nothing."""

    def __init__(self, message: str, hint: str | None = None, cut_off: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.cut_off = cut_off  # cut at the token limit even when asked for fewer words


def instructed(prompt: Sequence[Message], limit: int | None) -> list[Message]:
    """A summary request as sent: with the brief instruction in a small context, where the
    full one would take a third of it and ask for more than there is room to write."""
    if limit is None or limit >= BRIEF_BELOW:
        return list(prompt)
    brief = core.BRIEF_SUMMARY_PROMPT
    return [m.with_content(m.text.replace(core.SUMMARY_PROMPT, brief)) for m in prompt]


def summary_room(ctx: AppContext, model: str, prompt: Sequence[Message] = ()) -> int:
    """Tokens a summary may take: `compression.max_summary_tokens`, and in a known context
    what the request leaves of it (its estimate a quarter over, for what a server counts
    that koog does not), a quarter of it at least."""
    room = ctx.settings.compression.max_summary_tokens
    limit = context_limit(ctx, model)
    if limit is None:
        return room
    left = limit - request_tokens(prompt) * 5 // 4 - 32 if prompt else 0
    return max(16, min(room, max(limit // 4, left)))
