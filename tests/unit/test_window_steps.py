"""Windows that move in steps (issue 42; KOOG_SEMANTICS §1.4, koog's deviation).

A window's start moves `step` messages (or `step_tokens` tokens) at a time, counted from
the start of the list it is given, so the request's start holds between cuts and a
server's prompt cache with it. With a step of 1 both windows are Koog's rule. Two loops
are simulated, as koog runs them: serve windows the client's whole conversation every
request; the CLI stores the window of its own previous output plus the new turn.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from koogcli.core.chat_memory import merge
from koogcli.core.messages import Message, ToolCall, assistant, system, tool_result, user
from koogcli.core.preprocessors import (
    Preprocessor,
    TokenWindowPreprocessor,
    WindowPreprocessor,
    default_step,
    default_step_tokens,
)

Window = Callable[[list[Message]], list[Message]]
SYSTEM = system("be brief")


def words(m: Message) -> int:
    """A token count the tests can reason about: one per word, one for a call."""
    return len(m.text.split()) + len(m.tool_calls)


def is_prefix(earlier: Sequence[Message], later: Sequence[Message]) -> bool:
    return list(later[: len(earlier)]) == list(earlier)


def kept_after_filled(requests: Sequence[Sequence[Message]], filled: int) -> list[bool]:
    """For each request after the `filled`-th: does it start with the previous one?"""
    return [is_prefix(requests[i - 1], requests[i]) for i in range(filled + 1, len(requests))]


# --- the rule --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "step"), [(8, 6), (50, 12), (16, 6), (4, 3), (2, 1), (1, 1), (0, 1), (3, 2)]
)
def test_default_step_is_a_quarter_but_at_least_six_within_three_quarters(
    size: int, step: int
) -> None:
    assert default_step(size) == step


@pytest.mark.parametrize(("max_tokens", "step"), [(8000, 2000), (80, 20), (3, 1), (1, 1)])
def test_default_step_tokens_is_a_quarter(max_tokens: int, step: int) -> None:
    assert default_step_tokens(max_tokens) == step


@pytest.mark.parametrize("size", [0, 1, 2, 3, 5, 8])
def test_step_one_is_koogs_window_start(size: int) -> None:
    for count in range(30):
        assert WindowPreprocessor(size, step=1).start(count) == count - min(size, count)


@pytest.mark.parametrize(
    ("size", "step", "count", "start"),
    [
        (8, 6, 8, 0),  # not full: everything
        (8, 6, 9, 6),  # the first cut takes a whole step
        (8, 6, 14, 6),  # ... and holds while `step` more arrive
        (8, 6, 15, 12),
        (8, 3, 10, 3),
        (8, 1, 10, 2),  # Koog's
        (4, 9, 10, 8),  # a step above the size acts as the size
        (0, 1, 5, 5),  # size 0 keeps nothing
    ],
)
def test_window_start_moves_in_steps(size: int, step: int, count: int, start: int) -> None:
    assert WindowPreprocessor(size, step).start(count) == start


@pytest.mark.parametrize(("size", "step"), [(8, 6), (8, 1), (8, 8), (5, 3), (50, 12), (1, 1)])
def test_window_holds_between_size_less_step_and_size(size: int, step: int) -> None:
    for count in range(80):
        messages = [user(f"m{i}") for i in range(count)]
        kept = WindowPreprocessor(size, step)(messages)
        assert min(count, size - step + 1) <= len(kept) <= size
        assert kept == messages[len(messages) - len(kept) :]
        assert WindowPreprocessor(size, step)(kept) == kept  # its own output: unchanged


# --- the two loops -----------------------------------------------------------------------


def serve_requests(window: Window, turns: int) -> tuple[list[list[Message]], list[int]]:
    """koog serve: the client resends the whole conversation; the window shapes what goes
    upstream. Returns each request's history (the window's output) + the new question,
    and the length of the window's input that shaped it."""
    conversation: list[Message] = []
    requests, given = [], []
    for t in range(turns):
        question = user(f"question {t}")
        given.append(len(conversation))
        requests.append([*window(conversation), question])
        conversation += [question, assistant(f"answer {t}")]
    return requests, given


def cli_requests(
    window: Window, turns: int, prompt: Sequence[Message] = (SYSTEM,)
) -> tuple[list[list[Message]], list[int]]:
    """The CLI (Koog's ChatMemory): load = window(stored) under the live system prompt;
    store = window(the prompt + the reply), so the window runs over its own output. The
    stored system prompt takes a place in the window, as in Koog, until a cut drops it."""
    stored: list[Message] = []
    requests, given = [], []
    for t in range(turns):
        question = user(f"question {t}")
        request = [*merge(prompt, window(stored)), question]
        requests.append(request)
        stored = window([*request, assistant(f"answer {t}")])
        given.append(len(request) + 1)  # shapes the next request
    return requests, [0, *given[:-1]]


def kept_share(
    loop: Callable[[Window, int], tuple[list[list[Message]], list[int]]], size: int, step: int
) -> tuple[float, int]:
    """The share of requests after the window first cut that start with the previous
    request, and the most messages any window held (system prompt aside)."""
    window = WindowPreprocessor(size, step)
    requests, given = loop(window, 20)
    filled = next(i for i, n in enumerate(given) if n > size)
    kept = kept_after_filled(requests, filled)
    largest = max(len([m for m in r[:-1] if m.role != "system"]) for r in requests)
    return sum(kept) / len(kept), largest


def cli_without_prompt(window: Window, turns: int) -> tuple[list[list[Message]], list[int]]:
    return cli_requests(window, turns, ())


LOOPS = [serve_requests, cli_requests, cli_without_prompt]


@pytest.mark.parametrize("loop", LOOPS, ids=["serve", "cli", "cli-no-system-prompt"])
@pytest.mark.parametrize(("step", "least", "most"), [(default_step(8), 0.6, 1.0), (1, 0.0, 0.0)])
def test_a_window_of_8_keeps_the_previous_request_as_prefix(
    loop: Callable[[Window, int], tuple[list[list[Message]], list[int]]],
    step: int,
    least: float,
    most: float,
) -> None:
    """Issue 42, acceptance 3: over 20 turns no request holds more than 8 messages besides
    the system prompt and the new one, and at least 60% of the turns after the window
    filled keep the previous request as their prefix. Koog's step 1 keeps none."""
    share, largest = kept_share(loop, 8, step)
    assert largest <= 8
    assert least <= share <= most, share


def tool_turn(t: int, calls: int) -> list[Message]:
    ids = [f"c{t}.{k}" for k in range(calls)]
    return [
        user(f"question {t}"),
        assistant(None, [ToolCall(i, "search", "{}") for i in ids]),
        *[tool_result(i, "search", f"result {i}") for i in ids],
        assistant(f"answer {t}"),
    ]


def assert_no_split_pairs(given: Sequence[Message], kept: Sequence[Message]) -> None:
    """Every kept result has its call kept; every kept call keeps the results it had."""
    kept_calls = {c.id for m in kept for c in m.tool_calls}
    for m in kept:
        if m.role == "tool":
            assert m.tool_call_id in kept_calls, m.tool_call_id
    for m in given:
        if m.role == "tool" and m.tool_call_id in kept_calls:
            assert m in kept, m.tool_call_id


@pytest.mark.parametrize(
    "window",
    [
        WindowPreprocessor(8, 6),
        WindowPreprocessor(5, 3),
        WindowPreprocessor(8, 1),
        TokenWindowPreprocessor(30, words, step_tokens=8),
        TokenWindowPreprocessor(30, words, step_tokens=1),
    ],
    ids=["8/6", "5/3", "8/1", "tokens 30/8", "tokens 30/1"],
)
def test_window_never_splits_a_tool_call_from_its_results(window: Preprocessor) -> None:
    rng = random.Random(42)
    conversation: list[Message] = []
    stored: list[Message] = []
    for t in range(25):
        turn = tool_turn(t, rng.choice([0, 1, 2, 3]))
        conversation += turn
        assert_no_split_pairs(conversation, window(list(conversation)))  # serve
        given = [*stored, *turn]
        stored = window(given)  # the CLI
        assert_no_split_pairs(given, stored)


# --- token window ------------------------------------------------------------------------


def old_token_window(max_tokens: int, messages: list[Message]) -> list[Message]:
    """The token window before steps, walking back from the newest (kept as a reference)."""
    from koogcli.core.compression import is_memory
    from koogcli.core.preprocessors import _from

    pinned = [m.role == "system" or is_memory(m) for m in messages]
    budget = max_tokens - sum(words(m) for m, p in zip(messages, pinned, strict=True) if p)
    start = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        if pinned[index]:
            continue
        budget -= words(messages[index])
        if budget < 0:
            break
        start = index
    return _from(messages, start, pinned)


def mixed_history(seed: int, length: int) -> list[Message]:
    rng = random.Random(seed)
    out: list[Message] = [SYSTEM]
    for t in range(length):
        kind = rng.choice(["user", "assistant", "memory", "tools", "empty"])
        if kind == "memory":
            out.append(Message(role="user", content=f"note {t}", meta={"kind": "memory"}))
        elif kind == "tools":
            out += tool_turn(t, rng.choice([1, 2]))[1:-1]
        elif kind == "empty":
            out.append(assistant(""))
        else:
            text = " ".join(["w"] * rng.randint(1, 12))
            out.append(user(text) if kind == "user" else assistant(text))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_token_step_one_is_the_window_before_steps(seed: int) -> None:
    history = mixed_history(seed, 30)
    for budget in (1, 3, 10, 25, 40, 80, 200, 1000):
        window = TokenWindowPreprocessor(budget, words, step_tokens=1)
        assert window(history) == old_token_window(budget, history), budget


def token_requests(window: Window, turns: int, cli: bool) -> list[list[Message]]:
    """Both loops under a token window; memory notes arrive now and then and stay."""
    rng = random.Random(7)
    conversation: list[Message] = [SYSTEM]
    stored: list[Message] = []
    requests = []
    for t in range(turns):
        question = user(" ".join(["q"] * rng.randint(2, 8)))
        answer = assistant(" ".join(["a"] * rng.randint(4, 16)))
        if cli:
            request = [*merge([SYSTEM], window(stored)), question]
            stored = window([*request, answer])
        else:
            request = [*window(conversation), question]
            conversation += [question, answer]
        requests.append(request)
        if t % 7 == 3:  # a note recalled into the conversation, pinned from then on
            note = Message(role="user", content=f"note {t}", meta={"kind": "memory"})
            if cli:
                stored.append(note)
            else:
                conversation.append(note)
    return requests


@pytest.mark.parametrize("cli", [False, True], ids=["serve", "cli"])
@pytest.mark.parametrize(
    ("step", "least", "most"), [(default_step_tokens(400), 0.6, 1.0), (1, 0.0, 0.3)]
)
def test_token_window_keeps_the_prefix_within_budget_and_pins(
    cli: bool, step: int, least: float, most: float
) -> None:
    budget = 400
    window = TokenWindowPreprocessor(budget, words, step_tokens=step)
    requests = token_requests(window, 80, cli)
    histories = [r[:-1] for r in requests]
    for history in histories:
        assert sum(words(m) for m in history) <= budget
        assert history[0] == SYSTEM
    notes = [m.text for m in requests[-1] if m.meta.get("kind") == "memory"]
    assert notes == [f"note {t}" for t in range(79) if t % 7 == 3]
    full = next(i for i, h in enumerate(histories) if sum(words(m) for m in h) > budget * 3 // 4)
    kept = kept_after_filled(requests, full)
    share = sum(kept) / len(kept)
    assert least <= share <= most, share


@pytest.mark.parametrize(
    ("step", "kept"),
    [(1, ["b b b", "c c c c"]), (4, ["c c c c"]), (100, ["c c c c"])],
)
def test_token_window_cuts_whole_steps_but_keeps_the_newest_that_fits(
    step: int, kept: list[str]
) -> None:
    history = [user("a a a"), assistant("b b b"), user("c c c c")]  # 10 tokens
    window = TokenWindowPreprocessor(8, words, step_tokens=step)  # 2 over
    assert [m.text for m in window(history)] == kept
    huge = [user("a a"), assistant(" ".join(["b"] * 7))]  # 1 over: the newest still fits
    assert window(huge) == huge[1:]


# --- config ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "step", "step_tokens"),
    [
        ('type = "window"\nsize = 8\n', 6, None),
        ('type = "window"\nsize = 8\nstep = 1\n', 1, None),
        ('type = "token_window"\nmax_tokens = 8000\n', None, 2000),
        ('type = "token_window"\nmax_tokens = 8000\nstep_tokens = 10\n', None, 10),
    ],
)
def test_config_steps_reach_the_preprocessors(
    tmp_path: Path, toml: str, step: int | None, step_tokens: int | None
) -> None:
    from koogcli.config import loader
    from koogcli.services.compose import build_pipeline

    path = tmp_path / "c.toml"
    path.write_text("[[chat_memory.preprocessors]]\n" + toml)
    specs = loader.load(path, explicit=True).settings.chat_memory.preprocessors
    [built] = build_pipeline(specs, [tmp_path]).steps
    assert getattr(built, "step", None) == step
    assert getattr(built, "step_tokens", None) == step_tokens


@pytest.mark.parametrize(
    "toml",
    [
        'type = "window"\nsize = 8\nstep = 9\n',
        'type = "token_window"\nmax_tokens = 80\nstep_tokens = 81\n',
    ],
)
def test_a_step_past_the_window_is_a_config_error(tmp_path: Path, toml: str) -> None:
    from koogcli.config import loader
    from koogcli.core.errors import ConfigError

    path = tmp_path / "c.toml"
    path.write_text("[[chat_memory.preprocessors]]\n" + toml)
    with pytest.raises(ConfigError, match=r"c\.toml:4: chat_memory\.preprocessors\.0\.step"):
        loader.load(path, explicit=True)


@pytest.mark.parametrize("loop", LOOPS, ids=["serve", "cli", "cli-no-system-prompt"])
@pytest.mark.parametrize("size", [6, 8, 16])
def test_a_stepped_window_opens_its_conversation_with_a_question(
    loop: Callable[[Window, int], tuple[list[list[Message]], list[int]]], size: int
) -> None:
    """Strict chat templates (Gemma's, Mistral's) refuse a conversation that opens with an
    answer: after a stepped cut the first message besides system prompts is a user's."""
    requests, _ = loop(WindowPreprocessor(size, default_step(size)), 24)
    for request in requests:
        said = [m for m in request if m.role != "system"]
        assert said[0].role == "user", [m.role for m in request]


def test_a_stepped_window_after_a_tool_exchange_still_opens_with_a_question() -> None:
    history = [m for t in range(8) for m in tool_turn(t, 2)]
    for count in range(1, len(history) + 1):
        kept = WindowPreprocessor(8, 6)(history[:count])
        assert not kept or kept[0].role == "user", [m.role for m in kept]
