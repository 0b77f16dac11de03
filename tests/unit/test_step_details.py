"""Step checkpoint details: typed, versioned; what resume cannot trust is refused by name."""

from __future__ import annotations

import pytest

from koogcli.core.errors import CorruptDocumentError, UnknownFormatError
from koogcli.core.step_details import STEP_DETAILS_VERSION, StepDetails

DETAILS = StepDetails(3, 7, ("be brief",), "m", 0.2, True, 1, "abc123", {"pid": 1}, ("note",))


def test_round_trip_and_the_version_written() -> None:
    raw = DETAILS.to_dict()
    assert raw["version"] == STEP_DETAILS_VERSION
    assert StepDetails.from_dict(raw) == DETAILS


def test_a_calls_options_and_schema_are_kept_for_resume() -> None:
    """`koog chat -o seed 7 --schema ...` killed mid-turn resumes with both."""
    schema = {"type": "object", "properties": {"age": {"type": "integer"}}}
    given = StepDetails(1, 1, (), "m", None, True, 0, None, options={"seed": 7}, schema=schema)
    raw = given.to_dict()
    assert (raw["options"], raw["schema"]) == ({"seed": 7}, schema)
    assert StepDetails.from_dict(raw) == given
    assert "options" not in DETAILS.to_dict() and "schema" not in DETAILS.to_dict()


def test_steps_written_before_the_version_field_still_resume() -> None:
    raw = DETAILS.to_dict()
    del raw["version"], raw["tools"]
    assert StepDetails.from_dict(raw).model == "m"


def test_a_newer_koogs_details_are_refused_not_misread() -> None:
    with pytest.raises(UnknownFormatError, match="version 2"):
        StepDetails.from_dict({**DETAILS.to_dict(), "version": 2})


@pytest.mark.parametrize(
    ("key", "value"),
    [("base_count", "3"), ("stream", 1), ("rounds", True), ("model", None), ("system_prompt", "x")],
)
def test_a_field_of_the_wrong_type_names_itself(key: str, value: object) -> None:
    with pytest.raises(CorruptDocumentError, match=repr(key)):
        StepDetails.from_dict({**DETAILS.to_dict(), key: value})
