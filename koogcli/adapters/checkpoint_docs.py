"""Checkpoint documents as stored by the file backend: which ones koog can use, and the
header of one it lists but never uses.

Documents are checked by hand first, so `checkpoint list` starts without pydantic (0.15 s
to import); the check accepts only what CheckpointDoc (adapters/document_schema.py)
accepts, and anything else goes to pydantic, which has the last word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from koogcli.adapters.documents import optional_text
from koogcli.core.checkpoints import CHECKPOINT_FORMAT_VERSION, Checkpoint
from koogcli.core.names import SessionName

if TYPE_CHECKING:
    from koogcli.adapters.document_schema import CheckpointDoc

FORMAT = "koog.checkpoint"
UNREADABLE = -1


def valid(raw: object) -> CheckpointDoc | None:
    """The validated document; None when it is wrongly typed or of another format version
    (listed, never used)."""
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        return None
    if raw.get("version") != CHECKPOINT_FORMAT_VERSION:
        return None
    if _plainly_valid(raw):  # `checkpoint list` then starts without pydantic (0.15 s)
        return cast("CheckpointDoc", raw)
    from pydantic import ValidationError

    from koogcli.adapters.document_schema import CHECKPOINT_DOC

    try:
        return CHECKPOINT_DOC.validate_python(raw)
    except ValidationError:
        return None


_KINDS = frozenset(("restore", "step", "tombstone"))
_OPTIONAL_TEXT = ("label", "turn_id", "step", "output")


def _plainly_valid(doc: dict[str, Any]) -> bool:
    """True only for a document CheckpointDoc (adapters/document_schema.py) accepts as it
    is; anything else goes to pydantic."""
    kind, count, runs, details = (
        doc.get(k) for k in ("kind", "message_count", "messages", "details")
    )
    return (
        type(kind) is str
        and kind in _KINDS
        and type(doc.get("created_at")) is str
        and type(doc.get("reason")) is str
        and all(k in doc and optional_text(doc[k]) for k in _OPTIONAL_TEXT)
        and type(doc.get("manual")) is bool
        and type(details) is dict
        and all(type(key) is str for key in details)
        and type(count) is int
        and count >= 0
        and type(runs) is list
        and all(type(r) is list and len(r) == 2 and all(_seq(x) for x in r) for r in runs)
        and type(doc.get("digest", "")) is str
    )


def _seq(value: object) -> bool:
    return type(value) is int and value >= 0


def seq_of(doc: dict[str, Any]) -> int:
    seq = doc.get("seq")
    return seq if type(seq) is int else -1


def unusable(raw: object, cid: str, session: SessionName, seq: int) -> Checkpoint:
    """The header of a document koog will list but never use: another format version (its
    plain fields shown as far as they are readable) or unreadable."""
    version = raw.get("version") if isinstance(raw, dict) else None
    if (
        not isinstance(raw, dict)
        or raw.get("format") != FORMAT
        or not _is_int(version)
        or version == CHECKPOINT_FORMAT_VERSION  # this version, but wrongly typed
    ):
        return Checkpoint(
            cid, session.value, seq, "restore", "", reason="unreadable", format_version=UNREADABLE
        )
    assert isinstance(version, int)

    def text(key: str) -> str | None:
        value = raw.get(key)
        return value if isinstance(value, str) else None

    kind = raw.get("kind")
    return Checkpoint(
        cid,
        session.value,
        seq,
        kind if kind in ("restore", "step", "tombstone") else "restore",
        text("created_at") or "",
        reason=text("reason") or "unreadable",
        label=text("label"),
        manual=raw.get("manual") is True,
        turn_id=text("turn_id"),
        step=text("step"),
        format_version=version,
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
