"""What one `koog serve` process holds for all its requests: the context, per memory
namespace; the session gate; the worker threads turns run on. Safe from many threads."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from koogcli.config.schema import SERVE_CLIENT_HEADERS, ServeSettings
from koogcli.core.agent_edits import Watch
from koogcli.core.names import SessionName
from koogcli.server.admission import Admission
from koogcli.server.auth import Grant, grant_for
from koogcli.services.context import AppContext
from koogcli.services.turn.placement import SessionGate, namespaced

T = TypeVar("T")
_NAMESPACE_HEADER = "x-koog-memory-namespace"


class ServerState:
    def __init__(
        self,
        ctx: AppContext,
        workers: int | None = None,
        kept_token: str | None = None,
        page_secret: bytes | None = None,
    ) -> None:
        self.ctx = ctx
        # Signs the page's action tokens; one for all the workers of a server.
        self.page_secret = page_secret or os.urandom(32)
        self.stopping = threading.Event()  # set when serve stops: live updates end
        self.kept_token = kept_token  # required of every client (server/auth.py)
        self.settings: ServeSettings = ctx.settings.serve
        self.gate = SessionGate(self.settings.session_wait_seconds)
        # A turn waits on the upstream, not on the processor: a thread for every request a
        # connection can carry, made as needed, so no admitted request waits for a worker
        # and requests on other sessions never delay one another (SPEC §6 "Bounds").
        workers = workers or self.settings.max_connections
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="koog-turn")
        share = max(1, int(workers * self.settings.token_share))
        self.admission = Admission(
            self.settings.session_queue,
            self.settings.session_wait_seconds,
            share,
            by_token=bool(self.settings.tokens),
        )
        self._guard = threading.Lock()
        self._by_namespace: dict[str, AppContext] = {}

    async def run(self, work: Callable[[], T]) -> T:
        """Blocking service code, on a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, work)

    async def admitted(self, family: str | None, token: str, work: Callable[[], T]) -> T:
        """Work outside a turn that reaches the upstream (a compaction, embeddings, the
        model list, /koog/v1): admitted as a turn is, one at a time on a session's family,
        else within the share of the requests that name none, then run on a worker."""
        release = await self.admission.enter(family, token)
        try:
            return await self.run(work)
        finally:
            release()

    def grant(self, headers: Mapping[str, str]) -> Grant:
        return grant_for(headers, self.settings.tokens, self.kept_token)

    def session(self, grant: Grant, raw: str | None) -> SessionName | None:
        if raw is None:
            return None
        name = SessionName.parse(raw)
        grant.session(name.value)
        return name

    def client_session(self, headers: Mapping[str, str]) -> str | None:
        """The session a coding agent names with its own header (`claude-…`, `codex-…`,
        `opencode-…`; SPEC §6), the first of them sent."""
        for client, header in SERVE_CLIENT_HEADERS.items():
            given = headers.get(header)
            if given:
                return self.settings.clients[client].prefix + given
        return None

    def agent_recovers(self, headers: Mapping[str, str]) -> bool:
        """`[serve.clients.NAME] recover_overflow` of the agent whose header names the
        session."""
        for client, header in SERVE_CLIENT_HEADERS.items():
            if headers.get(header):
                return self.settings.clients[client].recover_overflow
        return True

    def file_watch(self, headers: Mapping[str, str]) -> Watch | None:
        """The agent whose header names the session, when its edits are journalled
        (`[serve.clients.NAME] files`)."""
        for client, header in SERVE_CLIENT_HEADERS.items():
            if headers.get(header):
                known = self.settings.clients[client]
                return Watch(known.root, self.settings.journal_max_bytes) if known.files else None
        return None

    def _client_namespace(self, headers: Mapping[str, str]) -> str | None:
        for client, header in SERVE_CLIENT_HEADERS.items():
            if headers.get(header):
                return self.settings.clients[client].namespace
        return None

    def model(self, asked: str | None, known_names: bool) -> str | None:
        """The upstream's name for the model a client asked for: `[serve] models`, else as
        asked (chat completions) or the configured model (protocols whose clients ask for
        their own vendor's names)."""
        if asked is not None and asked in self.settings.models:
            return self.settings.models[asked]
        return asked if known_names else None

    def wire_of(self, model: str | None) -> str:
        """The protocol the upstream of `model` (None: the configured one) speaks."""
        from koogcli.services.model_settings import llm_for

        settings = self.ctx.settings
        return llm_for(settings, model or settings.llm.model).wire_api

    def context(self, grant: Grant, headers: Mapping[str, str], user: str | None) -> AppContext:
        """The context whose long-term memory is the request's namespace: the header's,
        else the body's `safety_identifier` or `user`, else the agent's ([serve.clients]),
        else the config's."""
        from koogcli.services.memory import namespace_of

        default = self.ctx.settings.long_term_memory.retrieval.namespace
        namespace = namespace_of(
            headers.get(_NAMESPACE_HEADER) or user or self._client_namespace(headers), default
        )
        grant.namespace(namespace)
        if namespace == default:
            return self.ctx
        with self._guard:
            found = self._by_namespace.get(namespace)
            if found is None:
                found = self._by_namespace[namespace] = namespaced(self.ctx, namespace)
            return found

    def namespace(self, grant: Grant, raw: str | None) -> str | None:
        """A namespace a /koog/v1 request names, granted (None: the config's)."""
        from koogcli.services.memory import namespace_of

        default = self.ctx.settings.long_term_memory.retrieval.namespace
        grant.namespace(namespace_of(raw, default))
        return raw
