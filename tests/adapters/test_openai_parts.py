"""Content parts over real HTTP: the OpenAI adapter sends a message's parts as its
`content` list, and the test server reads that list as a real endpoint would (it echoes
the text parts and counts each other part at a flat cost, not its base64 as words)."""

from __future__ import annotations

import json

from koogcli.core.messages import Message
from koogcli.core.model_port import ModelRequest
from tests.adapters.test_openai_model import model_for
from tests.fakes.openai_server import MEDIA_TOKENS, FakeOpenAIServer, count_tokens
from tests.support.images import data_url, image_part, square_png

PNG = data_url(square_png())


def test_parts_reach_the_server_unchanged_and_the_echo_is_their_text(
    server: FakeOpenAIServer,
) -> None:
    parts = [
        {"type": "text", "text": "What colour "},
        image_part(PNG),
        {"type": "text", "text": "is it?"},
    ]
    m = Message("user", "What colour is it?", meta={"parts": parts})
    request = ModelRequest("test-model", [m], None, stream=True)
    done = model_for(server).complete(request)
    assert done.text == "echo: What colour is it?"
    sent = server.chat_requests[0]["messages"][0]["content"]
    assert json.dumps(sent) == json.dumps(parts)  # the data URL byte for byte
    assert done.usage is not None
    assert (
        done.usage.prompt_tokens
        == count_tokens([{"role": "user", "content": "What colour is it?"}]) + MEDIA_TOKENS
    )
