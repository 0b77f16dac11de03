"""langchain-openai: ChatOpenAI `invoke` and `stream` over two conversations under one
session header, then `bind_tools` with two tool turns (this script runs the tool and sends
a ToolMessage back) under another. Prints JSON: the replies and the tool's calls."""

from __future__ import annotations

from typing import Any

from _common import args, name_of, report
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

base_url, chat_session, tools_session = args()


def model(session: str) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=base_url,
        api_key="unused",
        default_headers={"X-Koog-Session": session},
        max_retries=0,
        timeout=30,
    )


replies: list[str] = []
chat = model(chat_session)


def say(history: list[BaseMessage], text: str, stream: bool = False) -> None:
    history.append(HumanMessage(text))
    if stream:
        reply = "".join(str(chunk.content) for chunk in chat.stream(history))
    else:
        reply = str(chat.invoke(history).content)
    history.append(AIMessage(reply))
    replies.append(reply)


first: list[BaseMessage] = []
say(first, "one")
say(first, "two")
say(first, "three", stream=True)
second: list[BaseMessage] = []
say(second, "other")
say(second, "more", stream=True)
say(second, "last")


@tool
def element(c: str) -> str:
    """Name the chemical element whose symbol is c."""
    return name_of(c)


tooled = model(tools_session).bind_tools([element])
history: list[BaseMessage] = []
for symbol in ("O", "Fe"):
    history.append(HumanMessage(f"element {symbol}"))
    asked: Any = tooled.invoke(history)
    history.append(asked)
    for call in asked.tool_calls:
        history.append(ToolMessage(element.invoke(call["args"]), tool_call_id=call["id"]))
    answer = tooled.invoke(history)
    history.append(answer)
    replies.append(str(answer.content))
report(replies)
