"""Whether a reply fits the JSON schema `koog chat --schema` asked for (SPEC §2
"Pipelines"), told in one line the model can act on; jsonschema is imported only here,
only when a schema was asked for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koogcli.core import structured
from koogcli.core.errors import UsageError


def check_schema(schema: Mapping[str, Any]) -> None:
    """A schema jsonschema can use, else exit 2 naming what is wrong with it."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as err:
        raise UsageError(f"--schema is not a valid JSON schema: {err.message}") from None


def problem(reply: str, schema: Mapping[str, Any]) -> str | None:
    """None when the reply is a JSON document fitting `schema`; else why not."""
    from jsonschema import Draft202012Validator

    try:
        found = structured.document(reply)
    except ValueError as err:
        return f"the reply is not a JSON document ({err})"
    errors = sorted(
        Draft202012Validator(dict(schema)).iter_errors(found), key=lambda e: list(e.absolute_path)
    )
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "the document"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first.message}{more}"
