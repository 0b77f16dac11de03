"""FakeChatModel: the ChatModel port without HTTP, for service and REPL tests.

Replies are taken from a queue (text, a Completion, or an exception to raise); with the
queue empty, `answer` decides (by default "echo: <last user text>"). Requests are kept.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from koogcli.core.messages import ToolCall
from koogcli.core.model_port import Completion, ModelRequest
from koogcli.core.ports import Usage


class FakeChatModel:
    def __init__(self, answer: Callable[[ModelRequest], str] | None = None) -> None:
        self.queue: deque[Any] = deque()
        self.requests: list[ModelRequest] = []
        self.answer = answer or (
            lambda r: (
                "echo: " + next((m.text for m in reversed(r.messages) if m.role == "user"), "")
            )
        )

    def list_models(self) -> list[str]:
        return ["fake-model", "gpt-4o-mini"]

    def enqueue(self, *items: Any) -> None:
        self.queue.extend(items)

    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        self.requests.append(request)
        item = self.queue.popleft() if self.queue else self.answer(request)
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            item = item(request, on_delta)
        completion = (
            item if isinstance(item, Completion) else Completion(str(item), usage=Usage(1, 1, 2))
        )
        if on_delta and completion.text:
            for word in re.split(r"(?<= )", completion.text):
                on_delta(word)
        return completion


class ProcessDeath(BaseException):
    """Stands in for SIGKILL in process: no code in koog catches it, so the turn is left
    exactly as a killed process leaves it."""


def mortal(ctx: Any) -> Any:
    """A context whose turns are owned by a process that is gone, so a turn left behind by
    ProcessDeath counts as interrupted (SPEC §5.10) in this same test process."""
    ctx.turn_owner = lambda: {"pid": -1, "start": None}
    return ctx


def calls(*pairs: tuple[str, dict[str, Any]]) -> Completion:
    return Completion(
        "",
        tuple(
            ToolCall(f"call_{uuid.uuid4().hex[:6]}", name, json.dumps(args)) for name, args in pairs
        ),
    )
