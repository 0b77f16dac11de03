"""Which session a chat uses (SPEC §2), and roles: `-s NAME`, `-c` (the most recently used
one), `chat.default_session`, or a new session with a generated, sortable name."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from koogcli.core.errors import UsageError
from koogcli.core.names import SessionName, generated
from koogcli.services.context import AppContext


def choose(ctx: AppContext, named: str | None, continue_: bool) -> tuple[SessionName, bool]:
    """The session and whether its name was made up just now."""
    if named is not None:
        return SessionName.parse(named), False
    if continue_:
        return ctx.latest_session(), False
    if ctx.settings.chat.default_session:
        return SessionName.parse(ctx.settings.chat.default_session), False
    return generated(datetime.now(UTC), os.urandom(2).hex()), True


def role_flags(ctx: AppContext, name: str) -> dict[str, object]:
    """Settings a role sets, as flags (what the command line gives itself still wins)."""
    roles = ctx.settings.roles
    if name not in roles:
        known = ", ".join(sorted(roles)) or "none are configured"
        raise UsageError(
            f"no role named {name!r} (roles: {known})",
            hint="define one as [roles.NAME] in the config file; `koog roles` lists them",
        )
    role = roles[name]
    flags: dict[str, object] = {"llm.system_prompt": role.system}
    if role.model:
        flags["llm.model"] = role.model
    if role.temperature is not None:
        flags["llm.temperature"] = role.temperature
    return flags
