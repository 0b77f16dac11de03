"""One ChatModel over several upstreams: each request goes to the client for its model's
protocol and server (`[models."NAME"]` over `[llm]`), each client built on first use and
shared by the models that name the same protocol, server and key."""

from __future__ import annotations

from collections.abc import Callable

from koogcli.core.model_port import ChatModel, Completion, ModelRequest

# A model's (protocol, server, key variable) and how to build its client.
Builder = Callable[[str], tuple[tuple[str, ...], Callable[[], ChatModel]]]


class WireRouter:
    def __init__(self, build: Builder) -> None:
        self.build = build
        self.clients: dict[tuple[str, ...], ChatModel] = {}

    def client(self, model: str) -> ChatModel:
        where, make = self.build(model)
        found = self.clients.get(where)
        if found is None:
            found = self.clients[where] = make()
        return found

    def complete(
        self,
        request: ModelRequest,
        on_delta: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> Completion:
        return self.client(request.model).complete(request, on_delta, on_reasoning)

    def list_models(self) -> list[str]:
        return self.client("").list_models()
