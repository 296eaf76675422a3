"""A vector bound as a ``real[]`` parameter, packed in PostgreSQL's binary array format.

psycopg dumps a ``list[float]`` as a text ``float8[]``, checking each element's text against a
quoting pattern: 0.68 ms for a 384-dimension query vector, and a search binds it in each of its
statements, on the thread that also starts the other statement. :class:`Float4Array` is packed
in about 0.01 ms by the standard library's ``array`` (numpy is no faster here, and would add
~70 ms to the retrieve function's cold start). Single precision is what every vector column
already holds (``real[]``, pgvector's ``vector`` and ``halfvec``): a ``float8[]`` parameter was
rounded to it by the casts anyway, to nearest, as ``array`` rounds here.

The dumper is registered on psycopg's global adapters when this module is imported, which
``context_ledger.db`` does: psycopg copies them into a connection when it opens it, so a
connection opened before the import could not bind a Float4Array (the local runtime's pool,
opened by whichever function ran first, did not).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence

import psycopg
from psycopg.abc import AdaptContext
from psycopg.adapt import Dumper
from psycopg.pq import Format

_FLOAT4 = psycopg.postgres.types["float4"]

# One dimension without NULLs: ndim, has-null flag, element type, length, lower bound 1; then
# each element as its length (4) and its big-endian value.
_HEADER = struct.Struct("!iiIii")
_ELEMENT = b"\x00\x00\x00\x04" + bytes(4)  # the length, and room for the value


class Float4Array:
    """Values to bind as one ``real[]`` parameter (in SQL, cast it as a ``float8[]`` would be)."""

    __slots__ = ("values",)

    def __init__(self, values: Sequence[float]) -> None:
        self.values = values  # converted when dumped: a statement may not bind it at all


class Float4ArrayDumper(Dumper):
    format = Format.BINARY

    def __init__(self, cls: type, context: AdaptContext | None = None) -> None:
        super().__init__(cls, context)
        # Set here, not on the class: psycopg would also register a class-level oid as *the*
        # binary dumper of every real[] (a binary COPY's rows, store_embeddings' lists).
        self.oid = _FLOAT4.array_oid

    def dump(self, obj: Float4Array) -> bytes:
        values = array("f", obj.values)  # rounded to single precision, to nearest
        if sys.byteorder == "little":
            values.byteswap()
        floats = values.tobytes()
        elements = bytearray(_ELEMENT * len(values))
        for byte in range(4):  # each value's four bytes after its length
            elements[4 + byte :: 8] = floats[byte::4]
        return _HEADER.pack(1, 0, _FLOAT4.oid, len(values), 1) + elements


psycopg.adapters.register_dumper(Float4Array, Float4ArrayDumper)
