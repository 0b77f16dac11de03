"""Token counts, and the prompt tokens a server read from its cache, in each wire shape.

SPEC §5.4a: koog shows how much of each request a server's prompt cache served. Servers
say so in four places, read here by small pure functions that every model client shares
(the chat-completions client today; the native Responses and Messages clients to come):

- chat completions: `usage.prompt_tokens_details.cached_tokens` (OpenAI, llama-server);
- llama-server's `timings` object: `cache_n` (tokens reused from the slot) and `prompt_n`
  (tokens computed), on its replies and final stream chunks even without `usage`;
- Responses: `usage.input_tokens_details.cached_tokens`;
- Anthropic Messages: `usage.cache_read_input_tokens`. There `input_tokens` counts only
  what came after the last cache breakpoint, so the request's prompt is the sum of
  `input_tokens`, `cache_creation_input_tokens` and `cache_read_input_tokens`.

Each reader takes the object as the wire gave it: a dict, or anything read by attribute
(chat_stream.Fields). None means the server did not report it; a
value that is not a count (missing, negative, a bool, text) is not reported either, and
nothing is ever invented: a cached figure of 0 is only what a server said.
"""

from __future__ import annotations

from collections.abc import Mapping

from koogcli.core.ports import Usage


def field(value: object, name: str) -> object:
    """`value[name]` of a dict, `value.name` of anything else; None when absent."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def count(value: object) -> int | None:
    """A token count as JSON carries it (an integer; a float with no fraction), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else None


def chat_cached(usage: object, timings: object = None) -> int | None:
    """Cached prompt tokens of a chat completion: the usage's details, else llama-server's
    `timings.cache_n` (older llama-servers send no details)."""
    found = count(field(field(usage, "prompt_tokens_details"), "cached_tokens"))
    return found if found is not None else count(field(timings, "cache_n"))


def chat_usage(usage: object, timings: object = None) -> Usage | None:
    """A chat completion's usage with its cached tokens. Without a `usage` object, llama-
    server's `timings` alone still tell the counts: the prompt is `prompt_n` computed plus
    `cache_n` reused, the reply `predicted_n`."""
    if usage is None:
        return _from_timings(timings)
    prompt = count(field(usage, "prompt_tokens")) or 0
    completion = count(field(usage, "completion_tokens")) or 0
    total = count(field(usage, "total_tokens")) or 0
    return Usage(prompt, completion, total, chat_cached(usage, timings))


def _from_timings(timings: object) -> Usage | None:
    computed = count(field(timings, "prompt_n"))
    cached = count(field(timings, "cache_n"))
    if computed is None or cached is None:  # an older server's prompt_n alone is not the prompt
        return None
    predicted = count(field(timings, "predicted_n")) or 0
    return Usage(computed + cached, predicted, computed + cached + predicted, cached)


def responses_cached(usage: object) -> int | None:
    """Cached input tokens of a Responses API usage object."""
    return count(field(field(usage, "input_tokens_details"), "cached_tokens"))


def responses_usage(usage: object) -> Usage | None:
    """A Responses API usage object (`input_tokens`, `output_tokens`, `total_tokens`)."""
    if usage is None:
        return None
    prompt = count(field(usage, "input_tokens")) or 0
    completion = count(field(usage, "output_tokens")) or 0
    total = count(field(usage, "total_tokens"))
    return Usage(
        prompt, completion, prompt + completion if total is None else total, responses_cached(usage)
    )


def messages_cached(usage: object) -> int | None:
    """Tokens an Anthropic Messages request read from the cache."""
    return count(field(usage, "cache_read_input_tokens"))


def messages_usage(usage: object) -> Usage | None:
    """An Anthropic Messages usage object. The prompt is every input token, cached or not:
    `input_tokens` holds only those after the last cache breakpoint. A stream reports
    input in `message_start` and output in `message_delta`: merge the two objects (the
    later one's keys over the earlier's) before reading them."""
    if usage is None:
        return None
    cached = messages_cached(usage)
    prompt = (
        (count(field(usage, "input_tokens")) or 0)
        + (count(field(usage, "cache_creation_input_tokens")) or 0)
        + (cached or 0)
    )
    completion = count(field(usage, "output_tokens")) or 0
    return Usage(prompt, completion, prompt + completion, cached)
