"""Content parts (SPEC §6) as koog sends and shows them: the parts a client sent go to the
upstream unchanged (the text replaced only where a redact preprocessor changed it);
`history show` and the exports name each non-text part by its label; the HTML page shows
an image sent as a data: URL inline and loads nothing else."""

from __future__ import annotations

import json
import re
from typing import Any

from koogcli.adapters.model.chat_upstream import message_to_wire
from koogcli.core import content_parts
from koogcli.core.messages import Message
from koogcli.core.results import SharedConversation
from koogcli.ui import export, render
from tests.support.images import data_url, image_part, square_png

PNG = data_url(square_png())
LABEL = f"[image: image/png, {len(square_png())} B]"
AUDIO = {"type": "input_audio", "input_audio": {"data": "AAAAAAAA", "format": "wav"}}
FILE = {
    "type": "file",
    "file": {"filename": "<b>notes</b>.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
}


def with_parts(parts: list[dict[str, Any]]) -> Message:
    return Message("user", content_parts.joined_text(parts), meta={"parts": parts})


def test_a_message_with_parts_is_sent_with_them_byte_for_byte() -> None:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What is in"}, image_part(PNG)]
    m = with_parts(parts)
    sent = message_to_wire(m)["content"]
    assert json.dumps(sent) == json.dumps(parts)
    assert sent[1]["image_url"]["url"] == PNG
    assert sent is m.meta["parts"]  # the stored list itself, not a copy


def test_a_message_of_text_alone_is_sent_as_a_string() -> None:
    assert message_to_wire(Message("user", "hello")) == {"role": "user", "content": "hello"}
    odd = Message("user", "hi", meta={"parts": "not a list"})
    assert message_to_wire(odd)["content"] == "hi"


def test_redacted_text_replaces_the_text_parts_and_the_media_stay() -> None:
    parts = [
        image_part(PNG),
        {"type": "text", "text": "mail dana@fbi.example", "cache_control": {"type": "x"}},
        AUDIO,
        {"type": "text", "text": " today"},
    ]
    redacted = with_parts(parts).with_content("mail [EMAIL] today")
    sent = message_to_wire(redacted)["content"]
    assert sent == [
        image_part(PNG),
        {"type": "text", "text": "mail [EMAIL] today", "cache_control": {"type": "x"}},
        AUDIO,
    ]
    assert parts[1]["text"] == "mail dana@fbi.example"  # the stored parts are untouched
    emptied = message_to_wire(with_parts(parts).with_content(""))["content"]
    assert emptied == [image_part(PNG), AUDIO]
    added = message_to_wire(with_parts([AUDIO]).with_content("note"))["content"]
    assert added == [{"type": "text", "text": "note"}, AUDIO]


def test_history_show_prints_a_label_for_each_part_after_the_text() -> None:
    m = with_parts([{"type": "text", "text": "Look:"}, image_part(PNG), AUDIO, FILE])
    text = render.format_messages([m], "text")
    assert text == (
        f"[user] Look:\n    {LABEL}\n    [audio: audio/wav, 6 B]\n    [file: application/pdf, 6 B]"
    )
    markdown = render.format_messages([m], "markdown")
    assert markdown.startswith(f"### user\n\nLook:\n\n{LABEL}\n")
    assert "base64" not in text + markdown
    shown = json.loads(render.format_messages([m], "json"))
    assert shown[0]["meta"]["parts"][1] == image_part(PNG)  # JSON keeps the stored dict
    alone = render.format_messages([with_parts([image_part("https://x.example/a.png")])], "text")
    assert alone == "[user] [image: from x.example]"


def test_the_html_page_shows_a_data_image_inline_and_labels_the_rest() -> None:
    remote = "https://images.example/cat.png"
    hostile = 'data:image/png;base64,"><script>alert(1)</script>'
    messages = (
        with_parts([{"type": "text", "text": "Two pictures"}, image_part(PNG), image_part(remote)]),
        with_parts([image_part(hostile), AUDIO, FILE]),
    )
    page = export.to_html(SharedConversation("pics", messages, None))
    assert f'<img src="{PNG}" alt="{LABEL}">' in page
    assert (
        remote not in page and "[image: from images.example]" in page
    )  # never loaded: named, not shown
    assert "<script>" not in page and "&quot;&gt;&lt;script&gt;" in page
    assert "[audio: audio/wav, 6 B]" in page
    assert "&lt;b&gt;notes" not in page  # a file with data is labelled by its type
    assert "[file: application/pdf, 6 B]" in page
    srcs = re.findall(r'src="([^"]*)"', page)
    assert srcs and all(s.startswith("data:image/") for s in srcs)
    csp = re.search(r'Content-Security-Policy" content="([^"]*)"', page)
    assert csp and csp.group(1) == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def test_the_markdown_export_names_the_parts() -> None:
    m = with_parts([{"type": "text", "text": "See"}, image_part(PNG)])
    out = export.to_markdown(SharedConversation("md", (m,), None))
    assert f"See\n\n{LABEL}\n" in out and "base64" not in out


def test_a_file_without_data_is_labelled_by_its_name_escaped() -> None:
    named = {"type": "file", "file": {"filename": "<b>notes</b>.pdf"}}
    page = export.to_html(SharedConversation("f", (with_parts([named]),), None))
    assert "[file: &lt;b&gt;notes&lt;/b&gt;.pdf]" in page and "<b>notes" not in page
