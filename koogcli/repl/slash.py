"""Slash-command registry: name, usage, help and handler; /help and completion read it.

Issues that add commands (compress, checkpoints, memory) register here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from koogcli.core.errors import UsageError

if TYPE_CHECKING:
    from koogcli.repl.state import ReplState


Handler = Callable[["ReplState", str], None]
# Values for the argument typed so far, each with a short description (may be "").
ArgumentCompleter = Callable[["ReplState", str], list[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class SlashCommand:
    name: str
    usage: str
    help: str
    handler: Handler
    aliases: tuple[str, ...] = ()
    complete: ArgumentCompleter | None = None
    paths: bool = False  # the argument is a file path


@dataclass
class Registry:
    commands: dict[str, SlashCommand] = field(default_factory=dict)

    def add(
        self,
        name: str,
        usage: str,
        help: str,
        aliases: tuple[str, ...] = (),
        complete: ArgumentCompleter | None = None,
        paths: bool = False,
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            command = SlashCommand(name, usage, help, handler, aliases, complete, paths)
            for key in (name, *aliases):
                self.commands[key] = command
            return handler

        return register

    def names(self) -> list[str]:
        return sorted(self.commands)

    def unique(self) -> list[SlashCommand]:
        seen: dict[str, SlashCommand] = {}
        for command in self.commands.values():
            seen.setdefault(command.name, command)
        return list(seen.values())

    def dispatch(self, state: ReplState, line: str) -> None:
        name, _, args = line[1:].strip().partition(" ")
        command = self.commands.get(name)
        if command is None:
            raise UsageError(f"unknown command /{name}", hint="/help lists the commands")
        if command.name in WRITES and not getattr(state, "save", True):
            raise UsageError(
                f"/{command.name} changes the session; this REPL runs with --no-save",
                hint="start `koog chat` without --no-save to use it",
            )
        command.handler(state, args.strip())


# Commands that write to the session: refused in a --no-save REPL, which writes nothing.
WRITES = frozenset(
    {"clear", "compress", "checkpoint", "rollback", "retry", "edit", "resume", "rename", "fork"}
)

REGISTRY = Registry()
