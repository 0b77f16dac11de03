"""The one place a turn's model request is composed (SPEC §6 "One request"): what a turn
has (the stored history or a client's conversation, the new messages, the preprocessors'
result, the records retrieval places, koog's or the client's tools and fields) becomes
the exact request that goes upstream. The CLI, the REPL and `koog serve` (translated or
passed through) all come here; the wire clients (adapters/model) only encode what it
returns, and `why`, the usage line and `X-Koog-Context-Tokens` read what it returned.

A client's request passed through in the upstream's own protocol goes as it came, so it is
composed from the whole conversation: a window cannot edit it (the client's thinking
blocks and cache would break), and every question it holds keeps its records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from koogcli.core import structured
from koogcli.core.chat_memory import merge
from koogcli.core.errors import KoogError
from koogcli.core.messages import Message, for_api
from koogcli.core.model_port import ModelRequest
from koogcli.core.tool_ids import distinct
from koogcli.core.why import Why
from koogcli.services import why
from koogcli.services.budget import context_limit

if TYPE_CHECKING:
    from koogcli.services.memory import Retrieval
    from koogcli.services.turn.state import TurnState


@dataclass(frozen=True)
class Composed:
    """A model request as it goes upstream, and what it was made of."""

    request: ModelRequest
    retrieval: Retrieval | None  # what the retrieve step placed (None: retrieval off)
    why: Why  # recorded with the reply (`koog why`)
    context: str  # `estimate/limit`: a serve client's X-Koog-Context-Tokens ("" for koog's)


def compose(turn: TurnState, offer_tools: bool) -> Composed:
    """The next model request of `turn`: koog's tools when `offer_tools`, or the client's."""
    passed = turn.recording.for_client and turn.client_options.passthrough is not None
    prompt = _conversation(turn, passed)
    retrieval = _retrieve(turn, prompt)
    if retrieval is not None:
        prompt = retrieval.messages
    request = _model_request(turn, prompt, offer_tools)
    offered = [_tool_name(t) for t in request.tools]
    shaped = why.record(turn, prompt, retrieval, request.temperature, offered, passed)
    context = _context(turn, prompt, shaped.estimate) if turn.recording.for_client else ""
    return Composed(request, retrieval, shaped, context)


def _conversation(turn: TurnState, passed: bool) -> list[Message]:
    """The messages of the request before retrieval: the preprocessed history (a pass-
    through: the whole of it, as the client sent it), this turn's messages, and what the
    model is told of its last answer's mistakes. Histories stored before ids were koog's
    may repeat one: never sent twice (§5.15)."""
    history = merge(turn.live, turn.loaded.base) if passed else turn.loaded.messages
    return for_api(distinct([*history, *turn.new, *turn.corrections]))


def _model_request(turn: TurnState, prompt: list[Message], offer_tools: bool) -> ModelRequest:
    """koog's tools and settings, or a client's own."""
    if turn.recording.for_client:
        client = turn.client_options
        temperature = turn.temperature if client.temperature is None else client.temperature
        given = client.passthrough
        return ModelRequest(
            turn.model,
            prompt,
            temperature,
            turn.stream,
            client.tools,
            client.response_format,
            client.extra,
            None if given is None else replace(given, sink=turn.events.on_raw),
        )
    choice = turn.ctx.settings.llm.tool_choice
    extra: dict[str, object] = {"tool_choice": choice} if offer_tools and choice else {}
    temperature = turn.temperature
    response_format: dict[str, object] | None = None
    own: dict[str, object] = {}
    if turn.call is not None:  # `koog chat -o KEY VALUE` and `--schema`, for this call
        options = dict(turn.call.options)
        asked = options.pop("temperature", None)
        if isinstance(asked, int | float) and not isinstance(asked, bool):
            temperature = float(asked)
        own = options
        if turn.call.schema is not None:
            response_format = structured.response_format(turn.call.schema)
    return ModelRequest(
        turn.model,
        prompt,
        temperature,
        turn.stream,
        turn.ctx.toolbox.specs() if offer_tools else (),
        response_format,
        extra,
        own_options=own,
    )


def _tool_name(spec: Mapping[str, object]) -> str:
    function = spec.get("function")
    return str(function.get("name", "")) if isinstance(function, dict) else ""


def _context(turn: TurnState, prompt: list[Message], estimate: int | None) -> str:
    """The request's estimated size against the model's context, as `estimate/limit`;
    counted here only when `why` did not count it (no context size is configured)."""
    from koogcli.services.budget import size_of

    limit = context_limit(turn.ctx, turn.model)
    if estimate is None:
        estimate = size_of(turn.ctx, turn.model, prompt, turn.loaded.messages).tokens
    return f"{estimate}/{limit if limit is not None else 'unknown'}"


def _retrieve(turn: TurnState, prompt: list[Message]) -> Retrieval | None:
    """The retrieve step under `long_term_memory.on_error`: `warn` sends the turn without
    memory (one warning per turn), `fail` fails the turn before the model is asked. With
    `after`, earlier questions keep their records when only the new search failed."""
    if not turn.ctx.settings.long_term_memory.retrieval.enabled:
        return None
    from koogcli.services import memory

    try:
        found = memory.retrieve(
            turn.ctx, prompt, {m.id for m in turn.new}, search=not turn.retrieval_failed
        )
        if found is None or found.problem is None:
            return found
        problem: KoogError = found.problem
    except KoogError as err:
        found, problem = None, err
    if turn.ctx.settings.long_term_memory.on_error == "fail":
        raise problem
    turn.retrieval_failed = True
    turn.events.warn(f"long-term memory retrieval failed, answering without it: {problem.message}")
    return found
