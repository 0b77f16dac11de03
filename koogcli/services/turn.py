"""run_turn: one ChatMemory turn (SPEC §1): load + preprocess, request, store + preprocess.

The transcript receives each message as it is produced. Chat history is written once, when
the turn completes; a failed or cancelled turn writes nothing to it (§5.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from koogcli.core.errors import TurnCancelledError
from koogcli.core.messages import Message, assistant, for_api, new_id, system, user
from koogcli.core.names import SessionName
from koogcli.core.ports import ModelRequest, Usage
from koogcli.services.context import AppContext


@dataclass(frozen=True, slots=True)
class TurnRequest:
    session: SessionName
    text: str
    model: str | None = None
    system_prompt: str | None = None
    stream: bool | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    session: str
    reply: str
    usage: Usage | None
    model: str
    revision: int
    stored_messages: int


def live_prompt(ctx: AppContext, override: str | None) -> list[Message]:
    text = override if override is not None else ctx.settings.llm.system_prompt
    return [system(text)] if text else []


def run_turn(
    ctx: AppContext, request: TurnRequest, on_delta: Callable[[str], None] | None = None
) -> TurnResult:
    live = live_prompt(ctx, request.system_prompt)
    memory = ctx.memory
    loaded = memory.load(request.session, live)
    turn_id = new_id()
    question = user(request.text)
    ctx.transcript.append(request.session, [question], turn_id)
    model_name = request.model or ctx.settings.llm.model
    stream = ctx.settings.chat.stream if request.stream is None else request.stream
    produced: list[str] = []

    def collect(delta: str) -> None:
        produced.append(delta)
        if on_delta is not None:
            on_delta(delta)

    model_request = ModelRequest(
        model=model_name,
        messages=for_api([*loaded.messages, question]),
        temperature=ctx.settings.llm.temperature,
        stream=stream,
    )
    try:
        completion = ctx.model().complete(model_request, collect)
    except KeyboardInterrupt:
        partial = Message(role="assistant", content="".join(produced), meta={"cancelled": True})
        ctx.transcript.append(request.session, [partial], turn_id)
        raise TurnCancelledError("turn cancelled; the session history is unchanged") from None
    reply = assistant(completion.text, completion.tool_calls)
    ctx.transcript.append(request.session, [reply], turn_id)
    committed = memory.commit(request.session, live, loaded, [question, reply])
    return TurnResult(
        request.session.value,
        completion.text,
        completion.usage,
        model_name,
        committed.revision,
        len(committed.messages),
    )
