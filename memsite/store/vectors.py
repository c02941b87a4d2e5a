"""Meaning for hybrid recall: vectors of memory texts from an embedder the caller plugs in.

An embedder is any callable turning a text into a vector (a sequence of
floats); memsite downloads no model and has none by default. Vectors are
derived data, like the catalog: kept in ``.memsite/vectors.sqlite3`` by model
and text, so an unchanged memory is embedded once, even across catalog
rebuilds, and a changed one again. They are normalised when stored, so a dot
product is the cosine similarity. numpy is used when it is installed.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from operator import mul
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInput
from .sqlite import connect, transaction

if TYPE_CHECKING:
    from .catalog import Catalog

Embedder = Callable[[str], Sequence[float]]
BATCH = 100  # vectors stored per transaction while many are embedded (Ctrl-C keeps what is done)


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


class Vectors:
    """The vectors of one model, cached on disk and, for the current commit, in one block of memory."""

    def __init__(self, path: Path, embedder: Embedder, progress: Callable[[int, int], None] | None = None) -> None:
        if not callable(embedder):
            raise InvalidInput(f"embedder: expected a callable (text -> vector), got {type(embedder).__name__}")
        self.embedder = embedder
        self.model = model_name(embedder)
        self._progress = progress
        self.db = connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, "
                        "v BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID")
        self._known: dict[bytes, bytes] = {}  # text key -> normalised float32 vector
        self._key_of_blob: dict[str, bytes] = {}  # memory file (blob id) -> text key
        self._loaded: tuple[str | None, list[int], bytes, int] | None = None  # commit, rows, vectors, dimension

    def close(self) -> None:
        self.db.close()

    def embed(self, text: str, what: str) -> array:
        """The normalised vector of ``text``; ``what`` names it in errors."""
        try:
            raw = self.embedder(text)
            vector = array("f", [float(x) for x in raw])
        except Exception as exc:  # the embedder is the caller's code: say whose failure it was
            raise InvalidInput(f"embedder {self.model} failed on {what}: {type(exc).__name__}: {exc}") from exc
        norm = math.sqrt(sum(x * x for x in vector))
        if not vector or not math.isfinite(norm) or norm == 0:
            raise InvalidInput(f"embedder {self.model} returned no usable vector for {what} "
                               "(empty, all zeros, or not finite numbers)")
        return array("f", [x / norm for x in vector])

    def similarities(self, catalog: Catalog, query: str) -> dict[int, float]:
        """Row number -> cosine similarity to ``query`` of every memory in ``catalog``."""
        if self._loaded is None or self._loaded[0] != catalog.commit:
            self._load(catalog)
        _, rows, block, dimension = self._loaded  # type: ignore[misc]
        wanted = self.embed(query, "the query")
        if rows and len(wanted) != dimension:
            raise InvalidInput(f"embedder {self.model} gave the query {len(wanted)} dimensions, "
                               f"the memories {dimension}; give each model its own 'model' name")
        return dict(zip(rows, _dots(block, dimension, wanted)))

    def _load(self, catalog: Catalog) -> None:
        """Line up the vectors of the catalog's rows; only files not seen before have their text read."""
        rows = catalog.blobs()
        unseen = [n for n, blob in rows if blob not in self._key_of_blob]
        texts = {}  # text key -> (memory id, text), for the files not seen before
        blob_keys = []
        for _, mid, blob, text in catalog.texts(unseen):
            key = hashlib.sha1(text.encode("utf-8")).digest()
            texts[key] = (mid, text)
            blob_keys.append((blob, key))
        missing = [key for key in texts if key not in self._known]
        for start in range(0, len(missing), 500):  # from disk: vectors embedded before, by any process
            chunk = missing[start : start + 500]
            self._known.update(self.db.execute(
                f"SELECT key, v FROM vectors WHERE model = ? AND key IN ({', '.join('?' * len(chunk))})",
                (self.model, *chunk)).fetchall())
        todo = [(key, *texts[key]) for key in missing if key not in self._known]
        for start in range(0, len(todo), BATCH):
            batch = [(key, self.embed(text, f"memory {mid}").tobytes()) for key, mid, text in todo[start : start + BATCH]]
            with transaction(self.db):
                self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                    ((self.model, key, v) for key, v in batch))
            self._known.update(batch)
            if self._progress is not None:
                self._progress(min(start + BATCH, len(todo)), len(todo))
        self._key_of_blob.update(blob_keys)  # only once their vectors are known
        vectors = [self._known[self._key_of_blob[blob]] for _, blob in rows]
        sizes = {len(v) for v in vectors}
        if len(sizes) > 1:
            raise InvalidInput(f"embedder {self.model} gave vectors of {len(sizes)} different sizes; "
                               "delete .memsite/vectors.sqlite3 if the model changed under the same name")
        dimension = sizes.pop() // 4 if sizes else 0
        self._loaded = (catalog.commit, [n for n, _ in rows], b"".join(vectors), dimension)


def mix(words: dict[int, float], meaning: dict[int, float], weight: float, keep: int,
        allowed: Iterable[int] | None = None) -> dict[int, float]:
    """Row number -> hybrid relevance: (1 - weight) x word match + weight x cosine, the best 1.0.

    The candidates are every word match and the ``keep`` rows closest in
    meaning (among ``allowed`` when given); negative cosines count as 0.
    """
    rows = meaning.keys() if allowed is None else (n for n in allowed if n in meaning)
    close = heapq.nlargest(keep, rows, key=meaning.__getitem__)
    mixed = {n: (1 - weight) * words.get(n, 0.0) + weight * max(0.0, meaning.get(n, 0.0)) for n in {*words, *close}}
    best = max(mixed.values(), default=0.0)
    return {n: r / best for n, r in mixed.items() if r > 0}


def _dots(block: bytes, dimension: int, query: array) -> list[float]:
    """The dot product of ``query`` with each float32 vector in ``block``."""
    if not block:
        return []
    try:
        import numpy
    except ImportError:
        view = memoryview(block).cast("f")
        return [sum(map(mul, view[i : i + dimension], query)) for i in range(0, len(view), dimension)]
    matrix = numpy.frombuffer(block, dtype=numpy.float32).reshape(-1, dimension)
    return (matrix @ numpy.frombuffer(query.tobytes(), dtype=numpy.float32)).tolist()  # type: ignore[no-any-return]
