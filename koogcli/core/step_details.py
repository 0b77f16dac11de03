"""What a step checkpoint records besides its messages: everything resume needs to go on
with the turn (§5.10), as one typed, versioned value. A step written by a newer koog is
refused by name instead of being read as if it were ours; one lacking a field or holding
the wrong type cannot be resumed and says which."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from koogcli.core.errors import CorruptDocumentError, UnknownFormatError

STEP_DETAILS_VERSION = 1
_ABANDON = "abandon the turn with `koog chat --no-resume`"
T = TypeVar("T")


@dataclass(frozen=True)
class StepDetails:
    base_count: int  # the loaded history's messages; the turn's own follow
    base_revision: int  # the revision they were loaded at (the store checks it)
    system_prompt: tuple[str, ...]  # the live system prompts, sent but not stored
    model: str
    temperature: float | None
    stream: bool
    rounds: int  # model requests that asked for tools so far
    restore_point: str | None  # the turn's undo point
    owner: Mapping[str, object] = field(default_factory=dict)  # the process running it
    tools: tuple[str, ...] = ()  # the tools it could call
    # `koog chat -o KEY VALUE` and `--schema`: the call's own options, kept for resume.
    options: Mapping[str, object] = field(default_factory=dict)
    schema: Mapping[str, object] | None = None

    def to_dict(self) -> dict[str, object]:
        extra: dict[str, object] = {"options": dict(self.options)} if self.options else {}
        if self.schema is not None:
            extra["schema"] = dict(self.schema)
        return {
            **extra,
            "version": STEP_DETAILS_VERSION,
            "base_count": self.base_count,
            "base_revision": self.base_revision,
            "system_prompt": list(self.system_prompt),
            "model": self.model,
            "temperature": self.temperature,
            "stream": self.stream,
            "rounds": self.rounds,
            "restore_point": self.restore_point,
            "owner": dict(self.owner),
            "tools": list(self.tools),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> StepDetails:
        version = raw.get("version", 1)  # steps written before the field are version 1
        if not isinstance(version, int) or version > STEP_DETAILS_VERSION:
            raise UnknownFormatError(
                f"step checkpoint details of version {version!r}; this koog reads version "
                f"{STEP_DETAILS_VERSION}",
                hint=f"resume with a newer koog, or {_ABANDON}",
            )
        temperature = raw.get("temperature")
        restore = raw.get("restore_point")
        owner = raw.get("owner")
        return cls(
            base_count=_field(raw, "base_count", int),
            base_revision=_field(raw, "base_revision", int),
            system_prompt=tuple(_texts(raw, "system_prompt")),
            model=_field(raw, "model", str),
            temperature=_number(temperature),
            stream=_field(raw, "stream", bool),
            rounds=_field(raw, "rounds", int),
            restore_point=restore if isinstance(restore, str) else None,
            owner=owner if isinstance(owner, dict) else {},
            tools=tuple(_texts(raw, "tools", required=False)),
            options=options if isinstance(options := raw.get("options"), dict) else {},
            schema=schema if isinstance(schema := raw.get("schema"), dict) else None,
        )


def owner_of(raw: Mapping[str, object]) -> Mapping[str, object] | None:
    """The owning process of a step, read without the rest (listings check it often)."""
    owner = raw.get("owner")
    return owner if isinstance(owner, dict) else None


def _field(raw: Mapping[str, object], key: str, kind: type[T]) -> T:
    value = raw.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise CorruptDocumentError(
            f"step checkpoint lacks a valid {key!r}; cannot resume", hint=_ABANDON
        )
    return value


def _texts(raw: Mapping[str, object], key: str, required: bool = True) -> list[str]:
    value = raw.get(key, None if required else [])
    if not isinstance(value, list):
        raise CorruptDocumentError(
            f"step checkpoint lacks a valid {key!r}; cannot resume", hint=_ABANDON
        )
    return [v for v in value if isinstance(v, str)]


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
