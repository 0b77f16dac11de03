"""openai-agents: an Agent on `OpenAIChatCompletionsModel` over an `AsyncOpenAI` client
carrying the session header, tracing off. `Runner.run` twice with a function tool (the SDK
runs it), then a second, tool-less conversation of two turns (the second streamed) under
the same header. Prints JSON: the replies and the tool's calls."""

from __future__ import annotations

import asyncio
from typing import Any

from _common import args, async_openai, name_of, report
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

base_url, session, _ = args()
set_tracing_disabled(True)


@function_tool
def element(c: str) -> str:
    """Name the chemical element whose symbol is c."""
    return name_of(c)


async def main() -> None:
    client = async_openai(base_url, session)
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    agent = Agent(name="chemist", instructions="Answer briefly.", model=model, tools=[element])
    replies: list[str] = []
    first = await Runner.run(agent, "element O")
    replies.append(str(first.final_output))
    items: list[Any] = [*first.to_input_list(), {"role": "user", "content": "element Fe"}]
    again = await Runner.run(agent, items)
    replies.append(str(again.final_output))
    other = await Runner.run(agent, "other")
    replies.append(str(other.final_output))
    items = [*other.to_input_list(), {"role": "user", "content": "more"}]
    streamed = Runner.run_streamed(agent, items)
    async for _event in streamed.stream_events():
        pass
    replies.append(str(streamed.final_output))
    await client.close()
    report(replies)


asyncio.run(main())
