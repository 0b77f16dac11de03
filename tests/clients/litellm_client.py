"""litellm: `litellm.completion(model="openai/...", api_base=..., extra_headers=...)`, three
turns (the third streamed), then a second conversation of two turns under the same header.
Prints JSON: the replies."""

from __future__ import annotations

from typing import Any

import litellm
from _common import args, report

base_url, session, _ = args()
litellm.telemetry = False
replies: list[str] = []


def say(history: list[dict[str, Any]], text: str, stream: bool = False) -> None:
    history.append({"role": "user", "content": text})
    answer: Any = litellm.completion(
        model="openai/gpt-4o-mini",
        api_base=base_url,
        api_key="unused",
        extra_headers={"X-Koog-Session": session},
        messages=history,
        stream=stream,
        num_retries=0,
        timeout=30,
    )
    if stream:
        reply = "".join(chunk.choices[0].delta.content or "" for chunk in answer if chunk.choices)
    else:
        reply = answer.choices[0].message.content
    history.append({"role": "assistant", "content": reply})
    replies.append(reply)


first: list[dict[str, Any]] = []
for text, stream in (("one", False), ("two", False), ("three", True)):
    say(first, text, stream)
second: list[dict[str, Any]] = []
for text, stream in (("other", False), ("more", True)):
    say(second, text, stream)
report(replies)
