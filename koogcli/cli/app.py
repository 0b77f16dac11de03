"""The Typer app, global options and the one error boundary (HOUSE_STYLE §3)."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from koogcli import __version__
from koogcli.cli import process
from koogcli.cli.options import Globals
from koogcli.core.errors import KoogError
from koogcli.ui import render


class KoogGroup(TyperGroup):
    """Maps every failure of every subcommand to one message and an exit code."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Click's own usage errors (unknown option, missing argument) in koog's style:
        `koog: error: ...` and a hint, exit 2."""
        standalone = kwargs.pop("standalone_mode", True)
        kwargs["standalone_mode"] = False
        argv = kwargs.get("args")
        kwargs["args"] = hoist_globals(list(sys.argv[1:] if argv is None else argv))
        if not standalone:
            return super().main(*args, **kwargs)
        if _completion_for_named_shell(kwargs["args"]):
            sys.exit(0)
        undecodable = next((a for a in kwargs["args"] if not _is_utf8(a)), None)
        if undecodable is not None:
            shown = undecodable.encode("utf-8", "surrogateescape")
            render.error(
                KoogError(
                    f"an argument is not valid UTF-8: {shown!r}",
                    hint="koog takes text in UTF-8; convert it first (e.g. `iconv -t utf-8`)",
                )
            )
            sys.exit(2)
        from typer._click.exceptions import ClickException, NoArgsIsHelpError

        try:
            code = super().main(*args, **kwargs)
        except NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "koog"
            render.error(KoogError(exc.format_message(), hint=f"`{where} --help` shows usage"))
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.stderr.write("\n")
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Any, name: str) -> Any:
        """A subcommand's module is imported when that subcommand is asked for, so
        `koog history search` does not import the REPL's, the server's, ...."""
        if name in COMMANDS and name not in self.commands:
            self.commands[name] = _load(name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KoogError as err:
            render.error(err)
            raise typer.Exit(err.exit_code) from None
        except KeyboardInterrupt:
            sys.stderr.write("\n")
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except Exception as exc:
            if os.environ.get("KOOG_DEBUG") == "1":
                raise
            render.internal_error(exc)
            raise typer.Exit(1) from None


# Each subcommand, in the order help lists them: its module under koogcli/cli/ and the
# Typer app (a group) or function (a command) there.
COMMANDS = {
    "chat": ("chat", "chat"),
    "models": ("catalog", "models"),
    "roles": ("catalog", "roles"),
    "templates": ("catalog", "templates"),
    "history": ("history", "app"),
    "compress": ("compress", "compress"),
    "checkpoint": ("checkpoints", "app"),
    "rollback": ("checkpoints", "rollback"),
    "memory": ("memory", "app"),
    "config": ("config_cmd", "app"),
    "storage": ("storage", "app"),
    "serve": ("serve", "serve"),
    "ui": ("ui_cmd", "ui"),
    "mcp": ("mcp", "app"),
    "why": ("why", "why"),
}


def _load(name: str) -> Any:
    import importlib

    from typer.main import get_command_from_info, get_group
    from typer.models import CommandInfo

    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(f"koogcli.cli.{module}"), attribute)
    command: Any
    if isinstance(target, typer.Typer):
        target.rich_markup_mode = None  # as the root's: plain help, as when it was added
        command = get_group(target)
    else:
        info = CommandInfo(name=name, callback=target)
        command = get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=None)
    command.name = name
    return command


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def _completion_for_named_shell(args: list[str]) -> bool:
    """`--install-completion zsh` / `--show-completion fish`: the shell named, not the one
    Typer detects from the parent process (which installed bash completion when asked
    for zsh). Without a name, Typer's own detection applies."""
    for index, arg in enumerate(args):
        option, _, shell = arg.partition("=")
        if option not in ("--install-completion", "--show-completion"):
            continue
        if not shell and index + 1 < len(args):
            shell = args[index + 1]
        if shell not in SHELLS:
            return False
        from typer._completion_shared import get_completion_script, install

        if option == "--show-completion":
            render.out(get_completion_script(prog_name="koog", complete_var=_COMPLETE, shell=shell))
            return True
        installed, path = install(shell=shell, prog_name="koog", complete_var=_COMPLETE)
        render.note(f"{installed} completion installed in {path}")
        render.note("Completion will take effect once you restart the terminal")
        return True
    return False


_COMPLETE = "_KOOG_COMPLETE"


def _is_utf8(arg: str) -> bool:
    """Python hands bytes that are not UTF-8 over as lone surrogates (surrogateescape)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


GLOBAL_OPTIONS = ("--config", "--data-dir")


def hoist_globals(args: list[str]) -> list[str]:
    """Global options work after the subcommand too (`koog chat --config F`): they are
    moved in front of it before parsing. Nothing after `--` is touched."""
    front: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest += args[index:]
            break
        if arg in GLOBAL_OPTIONS and index + 1 < len(args):
            front += args[index : index + 2]
            index += 2
            continue
        if arg.split("=", 1)[0] in GLOBAL_OPTIONS and "=" in arg:
            front.append(arg)
        else:
            rest.append(arg)
        index += 1
    return front + rest


app = typer.Typer(
    cls=KoogGroup,
    name="koog",
    help="Chat with any OpenAI-compatible model, with memory you can see and control.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        render.out(f"koog {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    ctx: typer.Context,
    config: str | None = typer.Option(
        None, "--config", metavar="PATH", help="Config file (env KOOG_CONFIG)."
    ),
    data_dir: str | None = typer.Option(
        None, "--data-dir", metavar="PATH", help="Data folder (env KOOG_DATA_DIR)."
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="Show the version and exit."
    ),
) -> None:
    g = ctx.ensure_object(Globals)
    g.config = config or g.config
    g.data_dir = data_dir or g.data_dir


# `koog chat -o KEY VALUE` / `-p KEY VALUE` (llm's form): Typer takes one value per
# option, so the pair travels as one, joined by a character no shell line types.
PAIR_OPTIONS = frozenset({"-o", "--option", "-p", "--param"})
PAIR_JOIN = "\x1f"


def paired(args: list[str]) -> list[str]:
    """`args` with each KEY VALUE after a pair option of `chat` joined into one value."""
    at = _command_at(args)
    if at is None or args[at] != "chat":
        return args
    out, index = args[: at + 1], at + 1
    while index < len(args):
        word = args[index]
        if word == "--":
            return out + args[index:]
        if (
            word in PAIR_OPTIONS
            and index + 2 < len(args)
            and "--" not in args[index + 1 : index + 3]
        ):
            out += [word, f"{args[index + 1]}{PAIR_JOIN}{args[index + 2]}"]
            index += 3
            continue
        out.append(word)
        index += 1
    return out


def _command_at(args: list[str]) -> int | None:
    """Where the subcommand is: the first word that is no global option or its value."""
    index = 0
    while index < len(args):
        word = args[index]
        if word in ("--config", "--data-dir"):
            index += 2
        elif word.startswith("-"):
            index += 1
        else:
            return index
    return None


def main() -> None:
    process.one_shot()
    sys.argv[1:] = paired(sys.argv[1:])
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    process.leave(code)
