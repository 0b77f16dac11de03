"""Vectors on the wire to PostgreSQL: `real[]` in the binary format, built by numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Real4Array(bytes):
    """A vector already in PostgreSQL's binary `real[]` form (see `binary`)."""


def binary(vector: Sequence[float]) -> Real4Array:
    """`real[]` in the binary wire format, built by numpy: sending 1,536 floats this way
    costs microseconds where adapting a Python list element by element costs milliseconds."""
    import struct

    import numpy as np

    values = np.asarray(vector, dtype=">f4")
    header = struct.pack(">iiIii", 1, 0, 700, len(values), 1)  # 1 dim, no nulls, float4
    body = np.empty(len(values), dtype=[("size", ">i4"), ("value", ">f4")])
    body["size"], body["value"] = 4, values
    return Real4Array(header + body.tobytes())


def register_binary_arrays(conn: Any) -> None:
    from psycopg import postgres
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class Real4ArrayDumper(Dumper):
        format = Format.BINARY
        oid = postgres.types["real"].array_oid

        def dump(self, obj: Any) -> bytes:
            return bytes(obj)

    conn.adapters.register_dumper(Real4Array, Real4ArrayDumper)
