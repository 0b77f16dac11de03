"""pydantic-ai: an Agent on `OpenAIChatModel` with an `OpenAIProvider` whose `AsyncOpenAI`
client carries the session header; three turns carried with `message_history`, then a
second conversation of two turns (the second streamed) under the same header. Prints JSON:
the replies."""

from __future__ import annotations

import asyncio

from _common import args, async_openai, report
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

base_url, session, _ = args()


async def main() -> None:
    client = async_openai(base_url, session)
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, instructions="Answer briefly.")
    replies: list[str] = []
    history = None
    for text in ("one", "two", "three"):
        result = await agent.run(text, message_history=history)
        replies.append(result.output)
        history = result.all_messages()
    other = await agent.run("other")
    replies.append(other.output)
    async with agent.run_stream("more", message_history=other.all_messages()) as streamed:
        replies.append(await streamed.get_output())
    await client.close()
    report(replies)


asyncio.run(main())
