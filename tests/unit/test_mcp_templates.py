"""The argument templates of [[mcp.compensations]] (adapters/tools/mcp_templates.py)."""

from __future__ import annotations

import pytest

from koogcli.adapters.tools.mcp_templates import TemplateError, parsed_result, render

ARGS = {"entities": [{"name": "Ada", "n": 1}, {"name": "Alan", "n": 2}], "path": "/a b.txt"}


def test_a_whole_template_keeps_the_type_of_what_it_selects() -> None:
    assert render("{{ args.entities[*].name }}", ARGS, None) == ["Ada", "Alan"]
    assert render("{{args.entities[1].n}}", ARGS, None) == 2
    assert render("{{ args.entities[0] }}", ARGS, None) == {"name": "Ada", "n": 1}


def test_text_around_a_template_makes_a_string() -> None:
    assert render("undo of {{ args.path }}", ARGS, None) == "undo of /a b.txt"
    assert render("names: {{ args.entities[*].name }}", ARGS, None) == 'names: ["Ada", "Alan"]'


def test_nested_values_and_the_result_are_filled_in() -> None:
    result = parsed_result('{"id": "x-1", "tags": ["a"]}')
    given = {"id": "{{ result.id }}", "keep": [1, "{{ result.tags[0] }}"], "n": 3}
    assert render(given, ARGS, result) == {"id": "x-1", "keep": [1, "a"], "n": 3}
    assert parsed_result("plain words") == "plain words"
    assert render("{{ result }}", ARGS, parsed_result("plain words")) == "plain words"


@pytest.mark.parametrize(
    "template, said",
    [
        ("{{ args.missing }}", "no 'missing' there"),
        ("{{ args.entities[5].name }}", "no element 5"),
        ("{{ args.path[*] }}", "not a list"),
        ("{{ env.HOME }}", "starts at `args` or `result`"),
        ("{{ args.entities[x] }}", "cannot read"),
    ],
)
def test_a_template_that_does_not_fit_the_call_says_what_is_missing(
    template: str, said: str
) -> None:
    with pytest.raises(TemplateError, match=said.replace("[", r"\[").replace("*", r"\*")):
        render(template, ARGS, None)
