"""Cached prompt tokens read from every shape servers report them in (SPEC §5.4a), and
the Usage value that carries them: stored, summed, read back, never invented."""

from __future__ import annotations

from typing import Any

import pytest

from koogcli.adapters.model import cache_figures as figures
from koogcli.adapters.model.chat_stream import Fields
from koogcli.core.ports import Usage

CHAT = {
    "prompt_tokens": 120,
    "completion_tokens": 7,
    "total_tokens": 127,
    "prompt_tokens_details": {"cached_tokens": 96},
}
# llama-server: `prompt_n` computed, `cache_n` reused.
TIMINGS = {"cache_n": 96, "prompt_n": 24, "predicted_n": 7, "prompt_ms": 3.5}


@pytest.mark.parametrize(
    ("usage", "timings", "cached"),
    [
        (CHAT, None, 96),  # OpenAI, llama-server
        ({**CHAT, "prompt_tokens_details": {"cached_tokens": 0}}, None, 0),  # said 0: a re-read
        ({**CHAT, "prompt_tokens_details": None}, TIMINGS, 96),  # details absent: timings
        ({"prompt_tokens": 120}, TIMINGS, 96),
        ({"prompt_tokens": 120, "completion_tokens": 7}, None, None),  # nothing said
        ({**CHAT, "prompt_tokens_details": {"audio_tokens": 0}}, None, None),
        ({**CHAT, "prompt_tokens_details": {"cached_tokens": True}}, None, None),
        ({**CHAT, "prompt_tokens_details": {"cached_tokens": -1}}, None, None),
        ({**CHAT, "prompt_tokens_details": {"cached_tokens": "96"}}, None, None),
        ({**CHAT, "prompt_tokens_details": {"cached_tokens": 96.0}}, None, 96),
    ],
)
def test_chat_completions_cached_tokens(usage: Any, timings: Any, cached: int | None) -> None:
    assert figures.chat_cached(usage, timings) == cached
    read = figures.chat_usage(usage, timings)
    assert read is not None and read.cached_tokens == cached
    assert read.prompt_tokens == 120


def test_the_same_figures_read_by_attribute_as_the_sdk_and_the_forwarder_give_them() -> None:
    from openai.types.chat import ChatCompletionChunk

    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    sent = {**chunk, "choices": [], "usage": CHAT, "timings": TIMINGS}
    sdk = ChatCompletionChunk.model_validate(sent)
    forwarded = Fields(sent)
    for read in (sdk, forwarded):
        assert figures.chat_usage(read.usage, getattr(read, "timings", None)) == Usage(
            120, 7, 127, 96
        )


def test_llama_server_timings_alone_give_the_counts() -> None:
    """llama-server's replies carry `timings` even when no usage was asked for."""
    assert figures.chat_usage(None, TIMINGS) == Usage(120, 7, 127, 96)
    assert figures.chat_usage(None, Fields(TIMINGS)) == Usage(120, 7, 127, 96)
    # An older llama-server's `prompt_n` without `cache_n` is not the whole prompt.
    assert figures.chat_usage(None, {"prompt_n": 24, "predicted_n": 7}) is None
    assert figures.chat_usage(None, None) is None


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "input_tokens": 2006,
                "input_tokens_details": {"cached_tokens": 1920},
                "output_tokens": 300,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 2306,
            },
            Usage(2006, 300, 2306, 1920),
        ),
        ({"input_tokens": 10, "output_tokens": 2}, Usage(10, 2, 12, None)),
        (None, None),
    ],
)
def test_responses_usage(usage: Any, expected: Usage | None) -> None:
    assert figures.responses_usage(usage) == expected
    assert figures.responses_cached(usage) == (expected.cached_tokens if expected else None)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # Anthropic's input_tokens are those after the last breakpoint: the prompt is the sum.
        (
            {
                "input_tokens": 21,
                "cache_creation_input_tokens": 188,
                "cache_read_input_tokens": 3000,
                "output_tokens": 393,
            },
            Usage(3209, 393, 3602, 3000),
        ),
        ({"input_tokens": 50, "output_tokens": 5}, Usage(50, 5, 55, None)),
        (
            {"input_tokens": 50, "cache_read_input_tokens": 0, "output_tokens": 5},
            Usage(50, 5, 55, 0),
        ),
        (None, None),
    ],
)
def test_messages_usage(usage: Any, expected: Usage | None) -> None:
    assert figures.messages_usage(usage) == expected


def test_usage_stores_cached_tokens_only_when_reported() -> None:
    assert Usage(10, 2, 12).to_dict() == {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "total_tokens": 12,
    }
    assert Usage(10, 2, 12, 0).to_dict()["cached_tokens"] == 0
    assert Usage(10, 2, 12, 8).to_dict()["cached_tokens"] == 8


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        ({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}, Usage(10, 2, 12)),
        (
            {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "cached_tokens": 8},
            Usage(10, 2, 12, 8),
        ),
        (
            {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "cached_tokens": "8"},
            Usage(10, 2, 12),
        ),
        ({"prompt_tokens": 10}, None),
        ("damaged", None),
        (None, None),
    ],
)
def test_a_stored_usage_reads_back_older_records_included(raw: object, read: Usage | None) -> None:
    assert Usage.from_dict(raw) == read
    if read is not None:
        assert Usage.from_dict(read.to_dict()) == read


def test_a_turns_usage_sums_cached_tokens_and_keeps_not_reported() -> None:
    assert Usage(10, 1, 11).plus(Usage(20, 1, 21)).cached_tokens is None
    assert Usage(10, 1, 11, 4).plus(Usage(20, 1, 21, 9)) == Usage(30, 2, 32, 13)
    assert Usage(10, 1, 11, 0).plus(Usage(20, 1, 21)).cached_tokens == 0
    assert Usage(10, 1, 11, 4).plus(None) == Usage(10, 1, 11, 4)
