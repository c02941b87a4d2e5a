"""A bit for every sketch value in the catalog, so dedup asks SQLite only about texts it may know.

Dedup looks a new memory's sketch values (:func:`memsite.foundation.text.sketch`) up in
the catalog's ``sketches`` table: one query a memory, which for most new
memories finds nothing (at 10,000 memories, about 85% of a bulk import's).
The filter holds one bit per (category, value) in ``BITS`` bits, stored beside
the table in rows of ``ROW_BITS``; each bit is set in the SQLite transaction
that adds a row holding its value, and cleared only when the table is emptied.
So a value whose bit is clear is in no row, and a memory with fewer values set
than a near duplicate must share has none in the catalog (nor an exact one,
whose values are all its own). Values of rows deleted since leave their bits
set: they cost a query, never a duplicate missed.

A write of a few values (a single remember()) appends them to a short list
beside the bits instead of rewriting up to six rows of them: a page of the
catalog's log rather than six. The next write of many values, or the one
that makes the list ``RECENT_MAX`` long, folds the list into the bits;
reading the filter reads both.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from .sqlite import statements

BITS = 1 << 21  # 256 KiB: 60,000 values (10,000 memories) set 3% of them, 600,000 set 25%
ROW_BITS = 4096  # a write rewrites the rows of its values: 512 bytes each
_ROW_BYTES = ROW_BITS // 8
FOLD_AT = 64  # values from which a write sets bits rather than appending to the list
RECENT_MAX = 4096  # values the list holds at most
SCHEMA = """CREATE TABLE IF NOT EXISTS sketch_filter (row INTEGER PRIMARY KEY, bits BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS sketch_recent (k INTEGER NOT NULL);"""


def _bit(key: int) -> int:
    return (key ^ (key >> 32)) & (BITS - 1)  # (the category's bits folded onto the value's)


def rows_of(keys: Iterable[int]) -> dict[int, int]:
    """The filter's bits for sketch ``keys`` (see :func:`memsite.foundation.text.sketch_key`), as row -> its bits."""
    rows: dict[int, int] = {}
    for key in keys:
        bit = _bit(key)
        row = bit // ROW_BITS
        rows[row] = rows.get(row, 0) | 1 << bit % ROW_BITS
    return rows


def prepare(keys: list[int]) -> tuple[list[int], dict[int, int] | None]:
    """What :func:`add` writes for sketch ``keys``: the bits are made here (the thread staging the write)."""
    return keys, (rows_of(keys) if len(keys) >= FOLD_AT else None)


def add(db: sqlite3.Connection, prepared: tuple[list[int], dict[int, int] | None]) -> None:
    """Record the values of :func:`prepare` (inside the caller's write transaction, with the rows they stand for)."""
    keys, rows = prepared
    if rows is None:
        if not keys:
            return
        listed = db.execute(f"INSERT INTO sketch_recent (k) VALUES {', '.join(['(?)'] * len(keys))}", keys).lastrowid
        if listed is None or listed < RECENT_MAX:
            return
        rows = {}
    recent = [key for key, in db.execute("SELECT k FROM sketch_recent")]
    if recent:
        db.execute("DELETE FROM sketch_recent")
        for row, bits in rows_of(recent).items():
            rows[row] = rows.get(row, 0) | bits
    if not rows:
        return
    old = dict(db.execute("SELECT row, bits FROM sketch_filter WHERE row IN (SELECT value FROM json_each(?))",
                          (json.dumps(list(rows)),)))
    merged = [(row, (int.from_bytes(old.get(row, b""), "little") | bits).to_bytes(_ROW_BYTES, "little"))
              for row, bits in rows.items()]
    for sql, values in statements("INSERT OR REPLACE INTO sketch_filter (row, bits) VALUES ", merged):
        db.execute(sql, values)


def load(db: sqlite3.Connection) -> bytes:
    """The whole filter, for :func:`known`."""
    bits = bytearray(BITS // 8)
    for row, data in db.execute("SELECT row, bits FROM sketch_filter"):
        bits[row * _ROW_BYTES : row * _ROW_BYTES + len(data)] = data
    for bit in map(_bit, (key for key, in db.execute("SELECT k FROM sketch_recent"))):
        bits[bit >> 3] |= 1 << (bit & 7)
    return bytes(bits)


def known(bits: bytes, keys: Iterable[int]) -> int:
    """How many of ``keys`` may be in the catalog (the others surely are not)."""
    return sum(bits[bit >> 3] >> (bit & 7) & 1 for bit in map(_bit, keys))
