"""Meaning for hybrid recall: vectors of memory texts from an embedder the caller plugs in.

An embedder is any callable turning a text into a vector (a sequence of
floats); one with an ``embed_many(texts)`` method is given many texts at once.
Vectors are derived data, like the catalog: kept in ``.memsite/vectors.sqlite3``
by model and text, so an unchanged memory is embedded once, even across
catalog rebuilds, and a changed one again. They are normalised when stored, so
a dot product is the cosine similarity. The vectors of fixed reference texts
(the background questions a query is compared with) are kept there too.

Vectors also travel with the repository: every ``memsite sync`` (what its clone embedded already,
the configured model's) and ``memsite index embed --publish`` (every memory's) publish them
under ``vectors/<model>/`` (outside the site's folder), one append-only file per
publishing clone, so no two clones ever write the same file and merges never conflict on them.
A fresh clone reads them instead of embedding every memory again (see :func:`encode`). A
published vector is keyed by its text, like a cached one, and its file names the model: a file
of another model, or a damaged one, is passed over, and what it lacks is embedded.

For the current commit they are also held in memory as one float32 matrix
(with numpy; a list of arrays without), one row a memory. After a commit only
the rows of new texts are fetched; the others are copied from the previous
matrix, so a write does not make the next recall read every vector again.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import re
import struct
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import mul
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..foundation.errors import InvalidInput, MemsiteError
from .sqlite import connect, transaction

if TYPE_CHECKING:
    from .catalog import Catalog

Embedder = Callable[[str], Sequence[float]]
Published = Callable[[str | None, Iterable[bytes]], Mapping[bytes, bytes]]
"""The vectors published in the repository at a commit, of the text keys asked for: key -> normalised float32 bytes."""
BATCH = 100  # vectors stored per transaction while many are embedded (Ctrl-C keeps what is done)
PUBLISHED = "vectors"
"""The repository folder vectors are published in (outside the site's docs folder)."""
_MAGIC = b"memsite-vectors 1"


def published_folder(model: str) -> str:
    """Where the vectors of ``model`` are published: ``vectors/<its name, in file-name characters>``."""
    return f"{PUBLISHED}/{re.sub(r'[^A-Za-z0-9_.-]+', '--', model).strip('-.') or 'model'}"


def encode(model: str, dimension: int, records: Iterable[tuple[bytes, bytes]], *, header: bool = True) -> bytes:
    """Published vectors: a header line naming the format, the dimension and the model, then one
    record per vector: its text key (20 bytes), a float32 scale and the vector as int8 (x scale).

    int8 with a scale per vector keeps cosine similarities within 0.001 of the float32 ones, at a
    quarter of their size (384 + 24 bytes a memory for minilm). ``header``: the records alone, to
    append to a file that has it.
    """
    numpy = _numpy()
    out = [b"%s %d %s\n" % (_MAGIC, dimension, model.encode("utf-8"))] if header else []
    for key, vector in records:
        if numpy is not None:
            values = numpy.frombuffer(vector, dtype=numpy.float32)
            scale = float(numpy.abs(values).max()) / 127 or 1.0
            quantised = numpy.clip(numpy.rint(values / scale), -127, 127).astype(numpy.int8).tobytes()
        else:
            values = array("f", vector)
            scale = max(abs(v) for v in values) / 127 or 1.0
            quantised = array("b", [max(-127, min(127, round(v / scale))) for v in values]).tobytes()
        out.append(key + struct.pack("<f", scale) + quantised)
    return b"".join(out)


def decode(data: bytes, model: str) -> dict[bytes, bytes]:
    """Text key -> normalised float32 vector bytes of a published file of ``model``; {} for a file
    of another model or not in the format. A record cut short (a truncated file) is left out."""
    line, newline, body = data.partition(b"\n")
    parts = line.split(b" ", 3)
    if not newline or len(parts) != 4 or b" ".join(parts[:2]) != _MAGIC or parts[3] != model.encode("utf-8"):
        return {}
    try:
        dimension = int(parts[2])
    except ValueError:
        return {}
    size = 24 + dimension
    if dimension <= 0 or len(body) < size:
        return {}
    whole = len(body) // size * size
    numpy = _numpy()
    found = {}
    if numpy is not None:
        records = numpy.frombuffer(body[:whole], dtype=numpy.dtype(
            [("key", "S20"), ("scale", "<f4"), ("v", "i1", (dimension,))]))
        matrix = records["v"].astype(numpy.float32) * records["scale"][:, None]
        norms = numpy.linalg.norm(matrix, axis=1, keepdims=True)
        usable = numpy.isfinite(norms[:, 0]) & (norms[:, 0] > 0)
        matrix = matrix / numpy.where(norms > 0, norms, 1)
        for i in numpy.flatnonzero(usable).tolist():
            found[bytes(records["key"][i]).ljust(20, b"\0")] = matrix[i].tobytes()
        return found
    for start in range(0, whole, size):
        (scale,) = struct.unpack_from("<f", body, start + 20)
        values = [v * scale for v in array("b", body[start + 24 : start + size])]
        norm = math.sqrt(sum(v * v for v in values))
        if norm > 0 and math.isfinite(norm):
            found[body[start : start + 20]] = array("f", [v / norm for v in values]).tobytes()
    return found


def keys(data: bytes, model: str) -> frozenset[bytes]:
    """The text keys of the whole records of a published file of ``model`` (none for another model's):
    what it holds, without reading its vectors."""
    line, newline, body = data.partition(b"\n")
    parts = line.split(b" ", 3)
    if not newline or len(parts) != 4 or b" ".join(parts[:2]) != _MAGIC or parts[3] != model.encode("utf-8") \
            or not parts[2].isdigit() or int(parts[2]) == 0:
        return frozenset()
    size = 24 + int(parts[2])
    return frozenset(body[start : start + 20] for start in range(0, len(body) // size * size, size))


def text_key(abstract: str, content: str) -> bytes:
    """The key a memory's vector is kept and published under: the SHA-1 of the text an embedder reads (the
    abstract, then the body; the body alone when it holds the abstract, as the catalog gives it)."""
    text = content if abstract in content else f"{abstract}\n\n{content}"
    return hashlib.sha1(text.encode("utf-8")).digest()


def without(data: bytes, keys: Collection[bytes]) -> bytes | None:
    """A published file without the records of ``keys`` (its header and every other record byte for byte);
    None when it holds none of them, or is not in the format (such a file is passed over when read)."""
    line, newline, body = data.partition(b"\n")
    parts = line.split(b" ", 3)
    if not newline or len(parts) != 4 or b" ".join(parts[:2]) != _MAGIC or not parts[2].isdigit():
        return None
    size = 24 + int(parts[2])
    if size == 24 or not any(key in body for key in keys):
        return None
    records = [body[start : start + size] for start in range(0, len(body), size)]
    kept = [r for r in records if len(r) < size or r[:20] not in keys]  # (a record cut short stays as it was)
    return None if len(kept) == len(records) else line + newline + b"".join(kept)


def erase(path: Path, model_keys: Collection[bytes]) -> int:
    """Delete the vectors of ``model_keys`` (text keys, of any model) from the cache at ``path``, leaving
    their bytes nowhere in the file (SQLite's secure delete, the write-ahead log emptied); how many went.

    The rest of the cache stays: memories other than these are not embedded again.
    """
    if not path.exists() or not model_keys:
        return 0
    db = connect(path)
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'vectors'").fetchone() is None:
            return 0
        db.execute("PRAGMA secure_delete = ON")
        keys = list(model_keys)
        gone = 0
        with transaction(db):
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                gone += db.execute(f"DELETE FROM vectors WHERE key IN ({', '.join('?' * len(chunk))})",
                                   chunk).rowcount
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return gone
    finally:
        db.close()


def model_name(embedder: Embedder) -> str:
    """The name vectors are kept under: the callable's ``model`` attribute, else its qualified name.

    Give an embedder a ``model`` attribute naming its model and version, so
    that vectors of another model are never compared with its own.
    """
    name = getattr(embedder, "model", None)
    if isinstance(name, str) and name:
        return name
    kind = embedder if hasattr(embedder, "__qualname__") else type(embedder)
    return f"{kind.__module__}.{kind.__qualname__}"


@dataclass
class _Block:
    """The vectors of one commit's memories: row numbers ascending, one vector each."""

    commit: str | None
    rows: list[int]
    keys: list[bytes]  # the text key of each row
    matrix: Any  # numpy float32 (rows x dimension), or a list of array('f') without numpy
    dimension: int
    numbers: Any  # ``rows`` as a numpy array (None without numpy)


class Vectors:
    """The vectors of one model, cached on disk and, for the current commit, in one block of memory."""

    def __init__(self, path: Path | str, embedder: Embedder, progress: Callable[[int, int], None] | None = None,
                 published: Published | None = None) -> None:
        if not callable(embedder):
            raise InvalidInput(f"embedder: expected a callable (text -> vector), got {type(embedder).__name__}")
        self.embedder = embedder
        self.model = model_name(embedder)
        self._progress = progress
        self._published = published
        self.db = connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, "
                        "v BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID")
        self.db.execute("CREATE TABLE IF NOT EXISTS floors (key TEXT NOT NULL, memories INTEGER NOT NULL, "
                        "floor REAL NOT NULL, PRIMARY KEY (key, memories)) WITHOUT ROWID")
        # Which cached vectors are reference texts' rather than memories' (never published: see waiting()).
        self.db.execute("CREATE TABLE IF NOT EXISTS reference_keys (model TEXT NOT NULL, key BLOB NOT NULL, "
                        "PRIMARY KEY (model, key)) WITHOUT ROWID")
        self._key_of_blob: dict[str, bytes] = {}  # memory file (blob id) -> text key
        self._loaded: _Block | None = None
        self._floors: dict[str, tuple[int, float]] = {}
        self._known: dict[str, array] = {}  # text -> vector: the reference texts and the last query
        self._references: dict[tuple[str, ...], list[array]] = {}
        self._reference_matrices: dict[tuple[str, ...], Any] = {}

    def size(self, catalog: Catalog) -> int:
        """How many memories the catalog's commit has (their vectors loaded)."""
        if self._loaded is None or self._loaded.commit != catalog.commit:
            self._load(catalog)
        assert self._loaded is not None
        return len(self._loaded.rows)

    def saved_floor(self, key: str, memories: int, within: float) -> float | None:
        """The floor measured under ``key`` for a number of memories within ``within`` (a share) of ``memories``."""
        held = self._floors.get(key)
        if held is None or abs(held[0] - memories) > within * held[0]:
            row = self.db.execute("SELECT memories, floor FROM floors WHERE key = ? AND memories BETWEEN ? AND ? "
                                  "ORDER BY abs(memories - ?) LIMIT 1",
                                  (key, memories / (1 + within), memories / (1 - within), memories)).fetchone()
            if row is None:
                return None
            held = self._floors[key] = (row[0], row[1])
        return held[1]

    def save_floor(self, key: str, memories: int, floor: float) -> None:
        with transaction(self.db):
            self.db.execute("INSERT OR REPLACE INTO floors VALUES (?, ?, ?)", (key, memories, floor))
        self._floors[key] = (memories, floor)

    def close(self) -> None:
        self.db.close()

    def embed(self, text: str, what: str) -> array:
        """The normalised vector of ``text``; ``what`` names it in errors."""
        try:
            raw = self.embedder(text)
        except MemsiteError:  # a named model that cannot load says so itself
            raise
        except Exception as exc:  # the embedder is the caller's code: say whose failure it was
            raise InvalidInput(f"embedder {self.model} failed on {what}: {type(exc).__name__}: {exc}") from exc
        return self._normalised(raw, what)

    def query_vector(self, query: str) -> array:
        """The normalised vector of a query; the last one and the reference texts' are kept in memory."""
        found = self._known.get(query)
        if found is None:
            if len(self._known) > sum(map(len, self._references)):
                self._known = {text: v for texts, vectors in self._references.items()
                               for text, v in zip(texts, vectors)}
            found = self._known[query] = self.embed(query, "the query")
        return found

    def references(self, texts: tuple[str, ...]) -> list[array]:
        """The vectors of fixed texts (the background questions), embedded once and kept with the memories'."""
        found = self._references.get(texts)
        if found is None:
            keys = [hashlib.sha1(text.encode("utf-8")).digest() for text in texts]
            stored = dict(self.db.execute(f"SELECT key, v FROM vectors WHERE model = ? AND key IN "
                                          f"({', '.join('?' * len(keys))})", (self.model, *keys)).fetchall())
            todo = [(key, f"reference text {i + 1}", text) for i, (key, text) in enumerate(zip(keys, texts))
                    if key not in stored]
            if todo:
                batch = self._embed_batch(todo)
                with transaction(self.db):
                    self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                        ((self.model, key, v) for key, v in batch))
                stored.update(batch)
            with transaction(self.db):
                self.db.executemany("INSERT OR IGNORE INTO reference_keys VALUES (?, ?)",
                                    ((self.model, key) for key in keys))
            found = self._references[texts] = [array("f", stored[key]) for key in keys]
            self._known.update(zip(texts, found))
        return found

    def similarities(self, query: str, texts: tuple[str, ...]) -> list[float]:
        """The cosine similarity of ``query`` to each of ``texts`` (reference texts: see :meth:`references`)."""
        vectors, wanted = self.references(texts), self.query_vector(query)
        if vectors and len(wanted) != len(vectors[0]):
            raise InvalidInput(f"embedder {self.model} gave the query {len(wanted)} dimensions, "
                               f"the reference texts {len(vectors[0])}; give each model its own 'model' name")
        numpy = _numpy()
        if numpy is None:
            return [sum(map(mul, vector, wanted)) for vector in vectors]
        matrix = self._reference_matrices.get(texts)
        if matrix is None:
            matrix = self._reference_matrices[texts] = numpy.frombuffer(
                b"".join(v.tobytes() for v in vectors), dtype=numpy.float32).reshape(len(vectors), len(wanted))
        return numpy.einsum("ij,j->i", matrix, numpy.frombuffer(wanted.tobytes(), dtype=numpy.float32)).tolist()

    def _normalised(self, raw: Any, what: str) -> array:
        numpy = _numpy()
        if numpy is not None:
            try:
                values = numpy.asarray(raw, dtype=numpy.float32).ravel()
            except (TypeError, ValueError) as exc:
                raise InvalidInput(f"embedder {self.model} returned no usable vector for {what}: {exc}") from exc
            norm = float(numpy.linalg.norm(values)) if values.size else 0.0
            if not math.isfinite(norm) or norm == 0 or numpy.ndim(raw) > 1:
                raise InvalidInput(f"embedder {self.model} returned no usable vector for {what} "
                                   "(empty, all zeros, or not finite numbers)")
            return array("f", (values / norm).tobytes())
        try:
            vector = array("f", [float(x) for x in raw])
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"embedder {self.model} returned no usable vector for {what}: {exc}") from exc
        norm = math.sqrt(sum(x * x for x in vector))
        if not vector or not math.isfinite(norm) or norm == 0:
            raise InvalidInput(f"embedder {self.model} returned no usable vector for {what} "
                               "(empty, all zeros, or not finite numbers)")
        return array("f", [x / norm for x in vector])

    def _embed_batch(self, todo: list[tuple[bytes, str, str]]) -> list[tuple[bytes, bytes]]:
        """(text key, vector bytes) of (key, memory id, text) items, many at once when the embedder can."""
        many = getattr(self.embedder, "embed_many", None)
        if many is None:
            return [(key, self.embed(text, f"memory {mid}").tobytes()) for key, mid, text in todo]
        try:
            raws = list(many([text for _, _, text in todo]))
        except MemsiteError:
            raise
        except Exception as exc:
            raise InvalidInput(f"embedder {self.model} failed on memory {todo[0][1]} and {len(todo) - 1} more: "
                               f"{type(exc).__name__}: {exc}") from exc
        numpy = _numpy()
        if numpy is not None:  # the whole batch at once; a row that is not a usable vector is checked alone
            try:
                matrix = numpy.asarray(raws, dtype=numpy.float32)
            except (TypeError, ValueError):  # ragged or not numbers
                matrix = numpy.empty(0)
            norms = numpy.linalg.norm(matrix, axis=1, keepdims=True) if matrix.ndim == 2 else None
            if norms is not None and len(matrix) == len(todo) and numpy.isfinite(norms).all() and norms.all():
                return [(key, row.tobytes()) for (key, _, _), row in zip(todo, matrix / norms)]
        return [(key, self._normalised(raw, f"memory {mid}").tobytes()) for (key, mid, _), raw in zip(todo, raws)]

    def closest(self, catalog: Catalog, query: str, keep: int | None, allowed: set[int] | None = None,
                also: Iterable[int] = ()) -> dict[int, float]:
        """Row number -> cosine similarity to ``query``: the ``keep`` closest rows (all when None),
        among ``allowed`` when given, and the rows in ``also`` (the word matches, to mix with)."""
        if self._loaded is None or self._loaded.commit != catalog.commit:
            self._load(catalog)
        block = self._loaded
        assert block is not None
        wanted = self.query_vector(query)
        if block.rows and len(wanted) != block.dimension:
            raise InvalidInput(f"embedder {self.model} gave the query {len(wanted)} dimensions, "
                               f"the memories {block.dimension}; give each model its own 'model' name")
        if not block.rows:
            return {}
        numpy = _numpy()
        if numpy is None or block.numbers is None or isinstance(block.matrix, list):
            return _closest_plain(block, wanted, keep, allowed, also)
        rows = block.numbers
        # BLAS (a third of einsum's time at 100,000 rows of 384 dimensions; no slower with the other core busy)
        scores = block.matrix @ numpy.frombuffer(wanted.tobytes(), dtype=numpy.float32)
        positions = (numpy.flatnonzero(numpy.isin(rows, numpy.fromiter(allowed, numpy.int64, len(allowed))))
                     if allowed is not None else None)
        candidates = scores if positions is None else scores[positions]
        if keep is not None and keep < len(candidates):
            top = numpy.argpartition(-candidates, keep - 1)[:keep] if keep > 0 else numpy.empty(0, numpy.int64)
            picked = top if positions is None else positions[top]
        else:
            picked = numpy.arange(len(scores)) if positions is None else positions
        found = dict(zip(rows[picked].tolist(), scores[picked].tolist()))
        extra = numpy.fromiter((n for n in also if n not in found), numpy.int64)
        if len(extra):
            at = numpy.minimum(numpy.searchsorted(rows, extra), len(rows) - 1)
            hit = rows[at] == extra
            found.update(zip(extra[hit].tolist(), scores[at[hit]].tolist()))
        return found

    def contrast(self, catalog: Catalog, query: str, rows: Collection[int],
                 around: Collection[int]) -> dict[int, float]:
        """Row number -> the cosine similarity of ``query`` and each of ``rows``, both less the mean vector of
        the ``around`` rows: how the memory matches what sets the query apart from what those memories share.

        The rows must be the catalog's (as :meth:`closest` returns them); empty when ``around`` is.
        """
        if self._loaded is None or self._loaded.commit != catalog.commit:
            self._load(catalog)
        block = self._loaded
        assert block is not None
        if not around or not rows:
            return {}
        wanted = self.query_vector(query)
        numpy = _numpy()
        if numpy is None or block.numbers is None or isinstance(block.matrix, list):
            place = {n: i for i, n in enumerate(block.rows)}
            vectors = {n: block.matrix[place[n]] for n in {*rows, *around}}
            centre = [sum(column) / len(around) for column in zip(*(vectors[n] for n in around))]
            query_off = [q - c for q, c in zip(wanted, centre)]
            found = {}
            for n in rows:
                off = [v - c for v, c in zip(vectors[n], centre)]
                norms = math.sqrt(sum(map(mul, off, off)) * sum(map(mul, query_off, query_off)))
                found[n] = sum(map(mul, off, query_off)) / norms if norms else 0.0
            return found
        numbers = list(rows)
        matrix = block.matrix[numpy.searchsorted(block.numbers, numpy.asarray(numbers, dtype=numpy.int64))]
        centre = block.matrix[numpy.searchsorted(block.numbers, numpy.fromiter(around, numpy.int64))].mean(axis=0)
        offsets = matrix - centre
        query_off = numpy.frombuffer(wanted.tobytes(), dtype=numpy.float32) - centre
        norms = numpy.linalg.norm(offsets, axis=1) * numpy.linalg.norm(query_off)
        scores = numpy.divide(offsets @ query_off, norms, out=numpy.zeros(len(numbers), numpy.float32),
                              where=norms > 0)
        return dict(zip(numbers, scores.tolist()))

    def waiting(self, published: Collection[bytes]) -> int:
        """At most how many vectors of memories this clone has embedded that ``published`` lacks (earlier
        versions of memories are cached too): read from the cache alone, no memory's text."""
        cached = {key for key, in self.db.execute(
            "SELECT key FROM vectors WHERE model = ? AND key NOT IN (SELECT key FROM reference_keys WHERE model = ?)",
            (self.model, self.model))}
        return len(cached.difference(published))

    def unpublished(self, catalog: Catalog, published: Collection[bytes], *, embed: bool = True,
                    among: set[int] | None = None) -> list[tuple[bytes, bytes]]:
        """(text key, vector bytes) of the catalog's memories that ``published`` lacks: what to publish.

        ``embed=False``: only those embedded already (in memory, or in the cache by any process of
        this clone); nothing is embedded. ``among``: only these rows.
        """
        if embed and (self._loaded is None or self._loaded.commit != catalog.commit):
            self._load(catalog)
        block = self._loaded
        if block is not None and block.commit == catalog.commit:
            held = {key: i for i, (n, key) in enumerate(zip(block.rows, block.keys))
                    if key not in published and (among is None or n in among)}  # (one per text)
            return [(key, block.matrix[i].tobytes()) for key, i in held.items()]
        rows = [(n, blob) for n, blob in catalog.blobs() if among is None or n in among]
        unseen = [n for n, blob in rows if blob not in self._key_of_blob]
        for _, _, blob, text in catalog.texts(unseen):
            self._key_of_blob[blob] = hashlib.sha1(text.encode("utf-8")).digest()
        wanted = list(dict.fromkeys(key for _, blob in rows if (key := self._key_of_blob[blob]) not in published))
        found: list[tuple[bytes, bytes]] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            found += self.db.execute(f"SELECT key, v FROM vectors WHERE model = ? AND key IN "
                                     f"({', '.join('?' * len(chunk))})", (self.model, *chunk)).fetchall()
        return found

    @property
    def dimension(self) -> int:
        """The dimension of the loaded vectors (0 before any is loaded)."""
        return 0 if self._loaded is None else self._loaded.dimension

    def _load(self, catalog: Catalog) -> None:
        """Line up the vectors of the catalog's rows; only texts not in the previous block are looked up."""
        rows = catalog.blobs()
        previous = self._loaded
        held = {} if previous is None else {key: i for i, key in enumerate(previous.keys)}
        unseen = [n for n, blob in rows if self._key_of_blob.get(blob) not in held]
        texts = {}  # text key -> (memory id, text), for the texts the previous block did not have
        for _, mid, blob, text in catalog.texts(unseen):
            key = hashlib.sha1(text.encode("utf-8")).digest()
            self._key_of_blob[blob] = key
            if key not in held:
                texts[key] = (mid, text)
        missing = list(texts)
        fetched: dict[bytes, bytes] = {}
        for start in range(0, len(missing), 500):  # from disk: vectors embedded before, by any process
            chunk = missing[start : start + 500]
            fetched.update(self.db.execute(
                f"SELECT key, v FROM vectors WHERE model = ? AND key IN ({', '.join('?' * len(chunk))})",
                (self.model, *chunk)).fetchall())
        unfound = [key for key in missing if key not in fetched]
        if unfound and self._published is not None:  # published with the repository (a fresh clone)
            shared = self._published(catalog.commit, unfound)
            taken = [(key, shared[key]) for key in unfound if key in shared]
            if taken:  # a file naming this model with vectors of another size is not its
                size = previous.dimension * 4 if previous is not None and previous.rows else \
                    len(next(iter(fetched.values()), b"")) or len(self.query_vector("memsite")) * 4
                taken = [(key, v) for key, v in taken if len(v) == size]
            if taken:
                with transaction(self.db):
                    self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                        ((self.model, key, v) for key, v in taken))
                fetched.update(taken)
        todo = [(key, *texts[key]) for key in unfound if key not in fetched]
        for start in range(0, len(todo), BATCH):
            batch = self._embed_batch(todo[start : start + BATCH])
            with transaction(self.db):
                self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                    ((self.model, key, v) for key, v in batch))
            fetched.update(batch)
            if self._progress is not None:
                self._progress(min(start + BATCH, len(todo)), len(todo))
        self._key_of_blob = {blob: self._key_of_blob[blob] for _, blob in rows}  # forget files gone
        keys = [self._key_of_blob[blob] for _, blob in rows]
        sizes = {len(v) for v in fetched.values()} | ({previous.dimension * 4} if previous and held else set())
        if len(sizes) > 1:
            raise InvalidInput(f"embedder {self.model} gave vectors of {len(sizes)} different sizes; "
                               "delete .memsite/vectors.sqlite3 if the model changed under the same name")
        dimension = sizes.pop() // 4 if sizes else 0
        numbers = [n for n, _ in rows]
        numpy = _numpy()
        self._loaded = _Block(catalog.commit, numbers, keys,
                              _assemble(keys, held, None if previous is None else previous.matrix, fetched, dimension),
                              dimension, None if numpy is None else numpy.asarray(numbers, dtype=numpy.int64))


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _assemble(keys: list[bytes], held: dict[bytes, int], old: Any, fetched: dict[bytes, bytes], dimension: int) -> Any:
    """The matrix of ``keys``' vectors: rows of the previous matrix where it had them, else ``fetched``."""
    numpy = _numpy()
    if numpy is None or isinstance(old, list):
        return [old[held[key]] if key in held else array("f", fetched[key]) for key in keys]
    matrix = numpy.empty((len(keys), dimension), dtype=numpy.float32)
    if not keys:
        return matrix
    source = numpy.fromiter((held.get(key, -1) for key in keys), numpy.int64, len(keys))
    kept = source >= 0
    if old is not None and kept.any():
        matrix[kept] = old[source[kept]]
    new = numpy.flatnonzero(~kept)
    if len(new):
        matrix[new] = numpy.frombuffer(b"".join(fetched[keys[i]] for i in new.tolist()),
                                       dtype=numpy.float32).reshape(len(new), dimension)
    return matrix


def _closest_plain(block: _Block, wanted: array, keep: int | None, allowed: set[int] | None,
                   also: Iterable[int]) -> dict[int, float]:
    """What :meth:`Vectors.closest` computes, in plain Python (numpy not installed)."""
    matrix = block.matrix if isinstance(block.matrix, list) else [array("f", row.tobytes()) for row in block.matrix]
    scores = dict(zip(block.rows, (sum(map(mul, vector, wanted)) for vector in matrix)))
    rows = scores.keys() if allowed is None else (n for n in allowed if n in scores)
    close = list(rows) if keep is None else heapq.nlargest(keep, rows, key=scores.__getitem__)
    return {n: scores[n] for n in (*close, *also) if n in scores}
