"""Every command in the README runs as pasted (issue 46).

The README's fenced blocks are read as a reader meets them:

- every TOML block parses, and each one that configures koog passes `koog config validate`,
  as does every config file a shell line writes (`printf '...' > FILE.toml`); JSON blocks
  parse and Python blocks compile;
- each section's shell lines run in order, with the real `koog`, in a fresh home and
  working folder (the data dir is the default one under that home), so what an earlier line
  makes a later one uses. A line exits 0 unless its comment names another exit.

What is changed in a line is only what cannot be the same here: a loopback port (8765 is
the `koog serve` a line started, with `--port 0`; any other is the local test server
standing in for Ollama or llama.cpp), the PostgreSQL URL (the README's names
db.example), and a name the README elides with `…` (an agent's session, made by one
turn first). A synopsis line (`[--json]`, `ID`, `a | b`) runs as each command it stands
for: the required words, then with its optional flags that need no value, `[--yes]`
always (off a terminal a deleting command needs it), placeholders filled with real
values. A `koog chat` with no prompt opens the REPL on a pseudo-terminal and leaves it
with Ctrl-D. A comment that says a command continues "the same conversation" is held to
it: the request before it must have been stored in that session, not a fork. A `curl`
or Python block sent to `koog serve` must get a 200 (its access log says). What the
README takes for granted (a notes.md, a git change, a role) is made before the line that
needs it (`Reader.assume`). Proxies point at a closed port, so nothing reaches the
internet. The few lines that cannot run here are in SKIPPED, each with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pexpect
import pytest

from tests.conftest import KOOG_BIN
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.summaries import short_summaries
from tests.support.serving import KoogServe
from tests.support.zygote import Zygote

pytestmark = pytest.mark.e2e
Completed = subprocess.CompletedProcess[str]

README = Path(__file__).resolve().parents[2] / "README.md"
SERVE_PORT = "8765"  # the README's `koog serve` address: http://127.0.0.1:8765/v1

# Lines that cannot run here, each with the reason. Kept small: a line that can be made to
# run is run (see the module docstring); every pattern must still match a README line.
SKIPPED: list[tuple[str, str]] = [
    (r"^(python3? -m )?(pip|pipx|uv) ", "installs packages from PyPI"),
    (r"^python3? -m pytest\b", "the whole test suite, which this test is part of"),
    (r"^python -m llama_cpp\.server\b", "needs llama-cpp-python (a 20-minute build) and a model"),
    (r"(^|\s)claude$", "Claude Code, installed from npm"),
    (r"KOOG_CONFIG=~/(koog-)?claude\.toml", "its upstream is Anthropic's API, on the internet"),
    (r"--watch\b", "runs until Ctrl-C (tests/e2e/test_archive_agents_e2e.py drives it)"),
]

# TOML blocks for other programs, known by the file the sentence before them names.
FOREIGN_TOML = {"~/.codex/config.toml": "Codex CLI's own config"}

PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*(=[A-Z_]+)?(\.\.\.)?$")
ACCESS = re.compile(
    r"^\S+Z [A-Z]+ (?P<path>\S+) (?P<status>\d{3}) \d+ms session=(?P<session>\S+) (?P<what>.*) token="
)
VALUE_OPTIONS = {"-s", "--session", "-m", "--model", "--system", "-r", "--role", "-a", "--attach"}
VALUE_OPTIONS |= {"--config", "--data-dir"}


@dataclass(frozen=True, slots=True)
class Block:
    lang: str
    line: int  # the README line of its first line of content
    lines: tuple[str, ...]
    section: str  # the heading above it
    before: str  # the paragraph just before it


@dataclass(frozen=True, slots=True)
class Line:
    where: int  # its README line
    source: str  # as the README shows it
    command: str  # as a shell reads it, without the comment
    comment: str

    def __str__(self) -> str:
        return f"README.md:{self.where}: {self.source.strip()}"


def fail(where: Line | str, message: str) -> NoReturn:
    """A failure that names the README line and says what went wrong, nothing else."""
    pytest.fail(f"{where}\n  {message}", pytrace=False)


def read_blocks() -> list[Block]:
    blocks: list[Block] = []
    section, prose, body = "", [""], list[str]()
    fence: tuple[str, str, int] | None = None  # its backticks, language and first line
    for number, text in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if fence is not None and text.strip() == fence[0]:
            blocks.append(Block(fence[1], fence[2], tuple(body), section, "\n".join(prose)))
            fence, prose = None, [""]
        elif fence is not None:
            body.append(text)
        elif opening := re.match(r"^(`{3,})(\w*)\s*$", text):
            fence, body = (opening.group(1), opening.group(2), number + 1), []
        elif heading := re.match(r"^#+ (.*)", text):
            section, prose = heading.group(1), [""]
        elif text.strip():  # the paragraph before a block, blank lines aside
            prose = [text] if not prose[-1] else [*prose, text]
        else:
            prose = [*prose, ""] if prose[-1] else prose
    return blocks


def shell_lines(block: Block) -> list[Line]:
    """The block's commands: `\\` continuations and quotes across lines joined, `$ `
    prompts taken off (a console block's other lines are output), `# comments` apart."""
    found: list[Line] = []
    command, source, comment, quote, start = "", "", "", "", 0
    for offset, raw in enumerate(block.lines):
        text = raw
        if not command and not quote:
            if block.lang == "console" and not text.startswith("$ "):
                continue
            text = text.removeprefix("$ ")
            start = block.line + offset
        source += raw + "\n"
        i, kept, continued = 0, "", False
        while i < len(text):
            char = text[i]
            if quote:
                quote = "" if char == quote else quote
            elif char == "\\" and i + 1 == len(text):
                continued = True
                break
            elif char in "'\"":
                quote = char
            elif char == "#" and (i == 0 or text[i - 1].isspace()):
                comment = text[i + 1 :].strip()
                break
            elif char == "\\":
                kept, i = kept + text[i : i + 2], i + 2
                continue
            kept += char
            i += 1
        command += kept.rstrip() + (" \\\n" if continued else "\n" if quote else "")
        if not continued and not quote:
            if command.strip():
                found.append(Line(start, source.rstrip("\n"), command.strip(), comment))
            command, source, comment = "", "", ""
    return found


def skipped(command: str) -> str | None:
    return next((why for pattern, why in SKIPPED if re.search(pattern, command)), None)


def units(command: str) -> list[str]:
    """Words, keeping quotes as written and each `[...]` group whole."""
    found: list[str] = []
    word, quote, depth = "", "", 0
    for char in command:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "[" and not word:
            depth += 1
        elif char == "]" and depth:
            depth -= 1
        elif char.isspace() and not depth:
            found, word = ([*found, word] if word else found), ""
            continue
        word += char
    return [*found, word] if word else found


def is_synopsis(parts: list[str]) -> bool:
    """`[--json]` anywhere, or a placeholder before any `|` (after one it may be a
    pipeline's own word: `| grep ERROR`)."""
    before = parts[: parts.index("|")] if "|" in parts else parts
    return any(p.startswith("[") for p in parts) or any(PLACEHOLDER.match(p) for p in before)


def forms(command: str) -> list[list[str]]:
    """The commands a synopsis line stands for (module docstring)."""
    parts = units(command)
    alternatives: list[list[str]] = [[]]
    for part in parts:
        if part in ("|", "/"):
            alternatives.append([])
        else:
            alternatives[-1].append(part)
    first, others = alternatives[0], alternatives[1:]
    words = 0
    while words < len(first) and re.match(r"^[a-z][\w-]*$", first[words]):
        words += 1
    shared: list[str] = []
    if others and re.match(r"^[a-z]", others[0][0]):  # `path | show`: subcommands
        prefix = first[: words - 1]
    else:  # `ID... | --where KEY=VALUE`: arguments of one command, sharing its options
        prefix = first[:words]
        while others and others[-1] and others[-1][-1].startswith("["):
            shared.insert(0, others[-1].pop())
    made: list[list[str]] = []
    for alternative in [first[len(prefix) :], *others]:
        whole = [*prefix, *alternative, *shared]
        groups = [p[1:-1] for p in whole if p.startswith("[")]
        base = [p for p in whole if not p.startswith("[")]
        base += ["--yes"] if "--yes" in groups else []
        made.append(base)
        flags = [
            word
            for group in groups
            if group != "--yes" and "|" not in group
            if not any(PLACEHOLDER.match(w) for w in group.split())
            for word in group.split()
        ]
        made += [[*base, *flags]] if flags else []
    return made


def program(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """A command's leading `NAME=value` assignments, and the rest."""
    env: dict[str, str] = {}
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        name, value = words[0].split("=", 1)
        env[name], words = value, words[1:]
    return env, words


def repl_session(words: list[str]) -> str | None:
    """For `koog chat` with no prompt (the REPL): its `-s` session, or '' for a new one."""
    if words[:1] != ["koog"]:
        return None
    rest, session, positional = words[1:], "", []
    while rest:
        word, rest = rest[0], rest[1:]
        if word in VALUE_OPTIONS and rest:
            session = rest[0] if word in ("-s", "--session") else session
            rest = rest[1:]
        elif not word.startswith("-"):
            positional.append(word)
        elif word in ("--resume", "--no-resume"):
            return None
    return session if positional == ["chat"] else None


@dataclass
class Reader:
    """Runs one README section's lines in order, as a reader pasting them would."""

    env: dict[str, str]
    zygote: Zygote
    work: Path
    upstream: str  # the test server's port
    logs: Path
    postgres_url: str | None = None
    serve: KoogServe | None = None
    serve_at: Line | None = None
    seen: int = 0  # access-log lines read
    placed: str | None = None  # the session the last request through koog serve went to
    made: set[str] = field(default_factory=set)  # sessions made for lines that assume them
    elided: set[str] = field(default_factory=set)

    def run(self, line: Line) -> None:
        if skipped(line.command):
            return
        command = self.substitute(line.command)
        extra = self.assume(command)
        env, words = program(self.words(command))
        expected = int(m.group(1)) if (m := re.match(r"exits? (\d+)\b", line.comment)) else 0
        if "same conversation" in line.comment:
            self.check_same_conversation(line, words)
        if words[:2] == ["koog", "serve"]:
            self.start_serve(line, {**env, **extra}, [w for w in words[2:] if w != "&"])
        elif words[:2] == ["koog", "ui"]:
            self.ui(line, command, extra)
        elif words[:1] == ["koog"] and is_synopsis(units(command)):
            for form in forms(command):
                filled = " ".join(self.fill(line, form))
                self.check(line, self.bash(filled, extra), expected, filled)
        elif (session := repl_session(words)) is not None:
            self.repl(line, command, session, extra, expected)
        else:
            result = self.bash(command, extra, export=command.startswith("export "))
            self.check(line, result, expected, command)
            if SERVE_PORT in line.command:
                self.read_access_log(line)
            if written := re.search(r">\s*(\S+\.toml)\s*$", command):
                self.validate(line, written.group(1))

    def words(self, command: str) -> list[str]:
        try:
            return shlex.split(command)
        except ValueError:
            return []

    def substitute(self, command: str) -> str:
        def port(found: re.Match[str]) -> str:
            if found.group(2) != SERVE_PORT:
                return f"{found.group(1)}:{self.upstream}"
            if self.serve is None:
                fail(command, "uses koog serve's port, but no `koog serve` line ran before it")
            return f"{found.group(1)}:{self.serve.url.rsplit(':', 1)[1].split('/')[0]}"

        command = re.sub(r"(127\.0\.0\.1|localhost):(\d+)", port, command)
        if self.postgres_url:
            command = re.sub(r"postgresql://[^\s'\"]+", self.postgres_url, command)
        self.elided |= {m + "x" for m in re.findall(r"([\w.~-]+)…", command)}
        return re.sub(r"([\w.~-]+)…", lambda m: m.group(1) + "x", command)

    def assume(self, command: str) -> dict[str, str]:
        """What the README takes for granted before a line, made just before it; returns
        the line's extra environment."""
        if "-a notes.md" in command or 'notes.md" | sh' in command:
            (self.work / "notes.md").write_text("# Notes\n\nDeploys are blue-green.\n")
        if "-a photo.png" in command:  # an image and a PDF, as the line names them
            from tests.support.images import square_png

            (self.work / "photo.png").write_bytes(square_png(8))
            (self.work / "report.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
        if "person.schema.json" in command:
            schema = {"type": "object", "properties": {"name": {"type": "string"}}}
            (self.work / "person.schema.json").write_text(json.dumps(schema))
        if command.startswith("git log"):  # run in a repository with commits
            self.setup(
                "git init -q && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m one"
            )
        if command.startswith("git diff"):  # run in a repository with a change
            self.setup(
                "git init -q && echo one > plan.txt && git add plan.txt && echo two >> plan.txt"
            )
        for name in ("old1", "old2") if "history delete old1 old2" in command else ():
            self.turn(name)
        for name in self.elided:  # an agent's session, its name elided (`claude-5f0c…`)
            self.turn(name)
        if "--from ~/.local/share/koog" in command:  # a data dir that was used with files
            files = {k: v for k, v in self.env.items() if not k.startswith("KOOG_DATABASE")}
            self.turn("before-postgres", files)
        if "chatgpt-export.zip" in command:  # a ChatGPT export, as downloaded
            import zipfile

            export = [
                {
                    "id": "c1",
                    "mapping": {
                        "n1": {
                            "id": "n1",
                            "parent": None,
                            "children": [],
                            "message": {
                                "author": {"role": "user"},
                                "content": {"parts": ["a flaky test"]},
                            },
                        }
                    },
                }
            ]
            with zipfile.ZipFile(self.work / "chatgpt-export.zip", "w") as archive:
                archive.writestr("conversations.json", json.dumps(export))
        if "-r reviewer" in command:  # a role in the config the line uses
            config = self.work.parent / "roles.toml"
            config.write_text('[roles.reviewer]\nsystem = "You review code. Be brief."\n')
            return {"KOOG_CONFIG": str(config)}
        return {}

    def turn(self, session: str, env: dict[str, str] | None = None) -> None:
        if session not in self.made:
            self.made.add(session)
            done = self.helper("chat", "-s", session, "an earlier turn", env=env)
            if done.returncode != 0:
                fail(session, f"a turn the README assumes failed: {done.stderr}")

    def setup(self, script: str) -> None:
        done = subprocess.run(
            ["bash", "-c", script], env=self.env, cwd=self.work, capture_output=True, timeout=60
        )
        if done.returncode != 0:
            fail(script, f"making what the README assumes failed: {done.stderr!r}")

    def helper(self, *args: str, env: dict[str, str] | None = None) -> Completed:
        """koog run by the test itself, not a README line: forked from the zygote (its
        imports done once), to spend the time on the README's own lines."""
        streams = [self.logs / f".helper.{part}" for part in ("in", "out", "err")]
        streams[0].write_text("")
        forked = self.zygote.spawn(
            *args, env=env or self.env, stdin=streams[0], stdout=streams[1], stderr=streams[2]
        )
        code = forked.wait(timeout=60)
        return Completed(args, code, streams[1].read_text(), streams[2].read_text())

    def fill(self, line: Line, form: list[str]) -> list[str]:
        filled: list[str] = []
        for word in form:
            if word in ("ID", "ID...") and form[1] == "memory":
                word = self.made_id(line, ["memory", "add", "a record for an ID"])
            elif word in ("ID", "ID...") and form[1] in ("checkpoint", "rollback"):
                session = form[form.index("-s") : form.index("-s") + 2] if "-s" in form else []
                word = self.made_id(line, ["checkpoint", "create", *session])
            elif word == "KEY=VALUE":
                word = "team=infra"
            elif word == "NAME":
                word = self.made_id(line, ["history", "list"], key="session")
            elif PLACEHOLDER.match(word):
                fail(line, f"no value to put for {word} (teach Reader.fill one)")
            filled.append(word)
        return filled

    def made_id(self, line: Line, args: list[str], key: str = "id") -> str:
        done = self.helper(*args, "--json")
        if done.returncode != 0:
            fail(line, f"koog {' '.join(args)}, to fill a placeholder, failed: {done.stderr}")
        shown = json.loads(done.stdout)
        return str((shown[0] if isinstance(shown, list) else shown)[key])

    def ui(self, line: Line, command: str, extra: dict[str, str]) -> None:
        """`koog ui` starts koog serve in the background (on a free port here: the README's
        is 8765) and, with no display to open a browser on, prints the page's address: the
        address must answer with the page; the serve it started is stopped after."""
        import signal
        import socket
        import urllib.request

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        done = self.bash(
            f"{command} --port {port}", {**extra, "DISPLAY": "", "WAYLAND_DISPLAY": ""}
        )
        started = re.search(r"\(pid (\d+),", done.stderr)
        try:
            self.check(line, done, 0, command)
            url = done.stdout.strip().splitlines()[-1]
            if url != f"http://127.0.0.1:{port}/":
                fail(line, f"printed {done.stdout!r}, not the page's address")
            asked = urllib.request.Request(url, headers={"Accept": "text/html"})
            with urllib.request.urlopen(asked, timeout=30) as answer:
                if b"<h1>Sessions</h1>" not in answer.read():
                    fail(line, f"{url} does not answer with the page")
        finally:
            if started is not None:
                os.kill(int(started.group(1)), signal.SIGTERM)

    def bash(self, command: str, extra: dict[str, str], export: bool = False) -> Completed:
        """Runs a line as a shell would; an `export` line's variables stay for the next."""
        exported = self.logs / "exported.env"
        # bash stays the command's parent, as a terminal's shell does (`koog
        # --install-completion` looks for it), and the command's status is the script's.
        after = f"env -0 > {shlex.quote(str(exported))}" if export else "exit $?"
        script = f"{command}\n{after}"
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", script],
            input="",
            capture_output=True,
            text=True,
            env={**self.env, **extra},
            cwd=self.work,
            timeout=60,
        )
        if export and done.returncode == 0:
            now = dict(v.split("=", 1) for v in exported.read_text().split("\0") if "=" in v)
            names = re.findall(r"(?:^|\s)([A-Za-z_]\w*)=", command)
            self.env.update({name: now[name] for name in names if name in now})
        return done

    def check(self, line: Line, done: Completed, expected: int, ran: str) -> None:
        if done.returncode != expected:
            fail(
                line,
                f"ran: {ran}\n  exited {done.returncode}, the README implies {expected}\n"
                f"  stdout: {done.stdout[-2000:]!r}\n  stderr: {done.stderr[-2000:]!r}",
            )
        if re.search(r"(^|\s)--json(\s|$)", ran) and ran.startswith("koog ") and expected == 0:
            try:
                json.loads(done.stdout)
            except ValueError:
                fail(line, f"ran: {ran}\n  --json printed no JSON: {done.stdout!r}")

    def repl(
        self, line: Line, command: str, session: str, extra: dict[str, str], expected: int
    ) -> None:
        env = {**self.env, **extra, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
        child = pexpect.spawn(
            "bash",
            ["-c", command],
            env=env,
            cwd=str(self.work),
            dimensions=(40, 120),
            encoding="utf-8",
            timeout=20,
        )
        prompt = (re.escape(session) if session else r"[\w~.-]+") + ">"
        try:
            child.expect(prompt)
        except (pexpect.TIMEOUT, pexpect.EOF):
            child.close()
            shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", str(child.before))
            fail(line, f"the REPL did not open (exit {child.exitstatus}); it showed: {shown!r}")
        child.sendcontrol("d")
        try:
            child.expect(pexpect.EOF)
        except pexpect.TIMEOUT:
            fail(line, "Ctrl-D did not leave the REPL")
        child.close()
        if child.exitstatus != expected:
            fail(line, f"the REPL exited {child.exitstatus}, the README implies {expected}")

    def start_serve(self, line: Line, env: dict[str, str], args: list[str]) -> None:
        self.stop_serve()  # a reader stops the one before with Ctrl-C
        try:
            self.serve = KoogServe(
                {**self.env, **env}, *args, log=self.logs / f"serve-{line.where}.log"
            ).start()
        except RuntimeError as exc:
            logged = (self.logs / f"serve-{line.where}.log").read_text()
            fail(line, f"{exc}; it said: {logged[-2000:]!r}")
        self.serve_at, self.seen = line, 0

    def stop_serve(self) -> None:
        if self.serve is not None and self.serve_at is not None:
            code = self.serve.stop()
            if code != 0:
                fail(self.serve_at, f"exited {code} on SIGTERM (the README: exit 0)")
        self.serve = None

    def read_access_log(self, line: Line) -> None:
        """Each request the line sent through koog serve must have had a 200."""
        assert self.serve is not None and self.serve.log_path is not None
        deadline, logged, fresh = time.monotonic() + 10, list[str](), list[re.Match[str]]()
        while not fresh and time.monotonic() < deadline:  # written when an answer ends
            logged = self.serve.log_path.read_text().splitlines()
            fresh = [m for m in map(ACCESS.match, logged[self.seen :]) if m]
            time.sleep(0 if fresh else 0.05)
        if not fresh:
            fail(line, "koog serve logged no request from it")
        self.seen = len(logged)
        for entry in fresh:
            if entry["status"] != "200":
                fail(line, f"got {entry['status']}, not 200; koog serve logged: {entry.group(0)}")
        what = fresh[-1]["what"].split()
        self.placed = what[1] if what[0] in ("continued", "forked") else fresh[-1]["session"]

    def check_same_conversation(self, line: Line, words: list[str]) -> None:
        session = words[words.index("-s") + 1] if "-s" in words else None
        if session != self.placed:
            fail(
                line,
                f"says it is the same conversation, but the request before it was stored in"
                f" session {self.placed!r}",
            )

    def run_python(self, block: Block) -> None:
        code = self.substitute("\n".join(block.lines))
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=self.env,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=60,
        )
        line = Line(block.line, block.lines[0], code, "")
        if done.returncode != 0:
            fail(line, f"the Python block failed: {done.stderr[-2000:]}")
        self.read_access_log(line)

    def validate(self, line: Line, path: str) -> None:
        file = Path(path.replace("~", self.env["HOME"], 1))
        done = self.bash(f"koog config validate {shlex.quote(str(file))}", {})
        if done.returncode != 0:
            fail(line, f"wrote a config koog refuses: {done.stderr}")


BLOCKS = read_blocks()
SHELL = ("sh", "bash", "console", "shell")
SECTIONS = list(dict.fromkeys(b.section for b in BLOCKS if b.lang in SHELL))


def as_a_model(body: dict[str, Any]) -> dict[str, Any]:
    """The test server answers as a model would: a summary shorter than what it summarises
    (its echo would be longer, and koog refuses a compression that lengthens), facts as the
    JSON asked for, JSON that fits a schema asked for, a fenced one-liner when asked for
    one, and the echo of the question to anything else."""
    if "<conversation_to_extract_facts>" in json.dumps(body.get("messages")):
        fact = {"fact": "We are building a chat client with memory."}
        return {"content": json.dumps({"facts": [fact]} if '"facts"' in json.dumps(body) else fact)}
    asked = body.get("response_format")
    if isinstance(asked, dict) and asked.get("type") == "json_schema":
        return {"content": json.dumps(_fitting(asked["json_schema"]["schema"]))}
    if "one-liner" in json.dumps(body.get("messages")):
        return {"content": "Here it is:\n\n```sh\nwc -l < notes.md\n```\n"}
    return short_summaries(body)


def _fitting(schema: dict[str, Any]) -> Any:
    """A value of the schema's type: what a model asked for structured output gives."""
    kind = schema.get("type")
    if kind == "object":
        return {k: _fitting(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [_fitting(schema.get("items", {})) for _ in range(2)]
    return {"integer": 36, "number": 1.5, "boolean": True}.get(str(kind), "Ada")


def block_id(block: Block) -> str:
    return f"README.md:{block.line}"


@pytest.fixture
def reader(
    koog_env: dict[str, str], server: FakeOpenAIServer, isolated: Path, zygote: Zygote
) -> Iterator[Reader]:
    env = {k: v for k, v in koog_env.items() if k != "KOOG_DATA_DIR"}  # the default one
    env["PATH"] = f"{Path(KOOG_BIN).parent}{os.pathsep}{env.get('PATH', '')}"
    for name in ("http_proxy", "https_proxy", "all_proxy"):  # nothing reaches the internet
        env[name] = env[name.upper()] = "http://127.0.0.1:9"
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    work = isolated / "work"
    work.mkdir()
    upstream = server.base_url.rsplit(":", 1)[1].split("/")[0]
    server.responder = as_a_model
    reading = Reader(env, zygote, work, upstream, isolated)
    yield reading
    reading.stop_serve()


@pytest.mark.parametrize("section", SECTIONS)
def test_section_runs_as_pasted(
    section: str, reader: Reader, request: pytest.FixtureRequest
) -> None:
    blocks = [b for b in BLOCKS if b.section == section]
    if any("postgresql://" in line for b in blocks for line in b.lines):
        reader.postgres_url = request.getfixturevalue("postgres").url
        reader.env["KOOG_DATABASE_SCHEMA"] = f"t_{uuid.uuid4().hex[:12]}"
    for block in blocks:
        if block.lang in SHELL:
            for line in shell_lines(block):
                reader.run(line)
        elif block.lang == "python" and f"127.0.0.1:{SERVE_PORT}" in "\n".join(block.lines):
            reader.run_python(block)
    reader.stop_serve()


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "toml"], ids=block_id)
def test_toml_block_parses_and_validates(block: Block, isolated: Path) -> None:
    text = "\n".join(block.lines)
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        fail(block_id(block), f"the TOML block does not parse: {exc}")
    if any(name in block.before for name in FOREIGN_TOML):
        return
    path = isolated / f"readme-{block.line}.toml"
    path.write_text(text + "\n", encoding="utf-8")
    done = subprocess.run(
        [KOOG_BIN, "config", "validate", str(path)], capture_output=True, text=True, timeout=30
    )
    if done.returncode != 0:
        fail(block_id(block), f"koog refuses the config block: {done.stderr}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in ("json", "python")], ids=block_id)
def test_json_and_python_blocks_parse(block: Block) -> None:
    text = "\n".join(block.lines)
    try:
        json.loads(text) if block.lang == "json" else compile(text, block_id(block), "exec")
    except (ValueError, SyntaxError) as exc:
        fail(block_id(block), f"the {block.lang} block does not parse: {exc}")


def test_every_skip_pattern_still_matches_a_readme_line() -> None:
    lines = [line.command for b in BLOCKS if b.lang in SHELL for line in shell_lines(b)]
    for pattern, why in SKIPPED:
        if not any(re.search(pattern, line) for line in lines):
            fail(pattern, f"nothing in the README is skipped any more for {why!r}: drop it")


def test_lines_and_synopses_are_read_as_a_reader_reads_them() -> None:
    block = Block(
        "console",
        10,
        (
            "$ koog chat -s a 'x # y' \\",
            "    --json   # a comment",
            "output of the command",
            '$ koog history show -s a | koog chat "summarise:"',
        ),
        "",
        "",
    )
    assert [(line.where, line.command, line.comment) for line in shell_lines(block)] == [
        (10, "koog chat -s a 'x # y' \\\n    --json", "a comment"),
        (13, 'koog history show -s a | koog chat "summarise:"', ""),
    ]
    assert forms("koog memory forget ID... | --where KEY=VALUE | --session NAME [--yes]") == [
        ["koog", "memory", "forget", "ID...", "--yes"],
        ["koog", "memory", "forget", "--where", "KEY=VALUE", "--yes"],
        ["koog", "memory", "forget", "--session", "NAME", "--yes"],
    ]
    assert forms("koog checkpoint show ID [--json] / delete ID [--yes]") == [
        ["koog", "checkpoint", "show", "ID"],
        ["koog", "checkpoint", "show", "ID", "--json"],
        ["koog", "checkpoint", "delete", "ID", "--yes"],
    ]
    assert not is_synopsis(units("koog history list | grep ERROR"))
