"""What one `koog serve` process holds for all its requests: the context, per memory
namespace; the session gate; the worker threads turns run on. Safe from many threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from koogcli.config.schema import ServeSettings
from koogcli.core.names import SessionName
from koogcli.server.admission import Admission
from koogcli.server.auth import Grant, grant_for
from koogcli.services.context import AppContext
from koogcli.services.exchange import SessionGate, namespaced

T = TypeVar("T")
_NAMESPACE_HEADER = "x-koog-memory-namespace"


class ServerState:
    def __init__(self, ctx: AppContext, workers: int = 64) -> None:
        self.ctx = ctx
        self.settings: ServeSettings = ctx.settings.serve
        self.gate = SessionGate(self.settings.session_wait_seconds)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="koog-turn")
        share = max(1, int(workers * self.settings.token_share)) if self.settings.tokens else None
        self.admission = Admission(
            self.settings.session_queue, self.settings.session_wait_seconds, share
        )
        self._guard = threading.Lock()
        self._by_namespace: dict[str, AppContext] = {}

    async def run(self, work: Callable[[], T]) -> T:
        """Blocking service code, on a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, work)

    def grant(self, headers: Mapping[str, str]) -> Grant:
        return grant_for(headers, self.settings.tokens)

    def session(self, grant: Grant, raw: str | None) -> SessionName | None:
        if raw is None:
            return None
        name = SessionName.parse(raw)
        grant.session(name.value)
        return name

    def context(self, grant: Grant, headers: Mapping[str, str], user: str | None) -> AppContext:
        """The context whose long-term memory is the request's namespace: the header's,
        else the body's `safety_identifier` or `user`, else the config's."""
        from koogcli.services.memory import namespace_of

        default = self.ctx.settings.long_term_memory.retrieval.namespace
        namespace = namespace_of(headers.get(_NAMESPACE_HEADER) or user, default)
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
