"""Embedders memsite knows by name, for hybrid recall without writing one.

``minilm`` (the ``memsite[embed]`` extra) is the sentence model
all-MiniLM-L6-v2 (Apache 2.0), shipped inside memsite as one int8 ONNX file
(memsite/weights/minilm, built by tools/build_minilm.py) and run by onnxruntime
on a CPU, with Hugging Face's tokenizers: no network, no PyTorch. It reads a
sentence as a whole, so a paraphrase lands near its answer and a question
about something else does not: on bench/data it finds about 70% of held-out
paraphrases in the first five while questions about nothing in memory recall
nothing, where wordllama found 38% (bench/quality.py, docs/benchmarks.md).
It is slower to embed than wordllama: each memory is embedded once, when
recall first needs it (or ``memsite index embed``).

``wordllama`` (``pip install wordllama``) is a static model: a vector per
token, averaged. It embeds far faster but cannot tell a
paraphrase's answer from a stray match. It ships its weights and tokenizer
inside its wheel. Its vectors are cut to their first 128 of 256 dimensions
(the model is trained so that a prefix is a smaller embedding). Its default
``WordLlama.load()`` still tries to download the tokenizer (it looks for
``tokenizer/`` while the wheel has ``tokenizers/``), so it is loaded with its
own package folder as the cache and downloads disabled.

A name comes from ``MemoryStore(path, embedder="minilm")``, from
``MEMSITE_EMBEDDING``, or from ``plugins.memsite.embedding.model`` in
``mkdocs.yml``, in that order. ``auto`` (the default) means minilm when
onnxruntime and tokenizers are installed, else wordllama when it is, else
words only, so a base install recalls by words; ``none`` means words only.

Other models are named by their library and a folder or a model name:
``model2vec:<folder or name>`` (static models such as potion),
``sentence-transformers:<folder or name>`` and ``fastembed:<name>``. A folder
is read as it is; a name is looked up in the library's local cache (Hugging
Face's, or fastembed's), and is downloaded only when that was allowed
(``MEMSITE_EMBEDDING_DOWNLOAD=1`` or ``embedding.download: true``): recall
never reaches the network on its own. Libraries and models are loaded on the
first recall; what is missing is said in one line when the store opens.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..foundation.errors import ConfigError, InvalidInput
from ..foundation.record import one_line
from .core_memory import TRUE

NAMES = ("auto", "minilm", "wordllama", "none")
LIBRARIES = {"model2vec": "model2vec", "sentence-transformers": "sentence_transformers", "fastembed": "fastembed"}
"""Libraries whose models can be named ``<library>:<folder or model name>``, and their import names."""
_load_lock = threading.Lock()
_models: dict[str, Any] = {}  # one loaded model per process, shared by every store
_CORES = os.cpu_count() or 1  # (asked once: it reads the system's files each time)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as memsite ships it (int8 ONNX), run by onnxruntime; loaded on first use."""

    folder = Path(__file__).parents[1] / "weights" / "minilm"
    model = "minilm-l6-v2/int8-1"
    """The name vectors are cached under: a rebuilt model file gets a new one (tests check its sha256)."""
    sha256 = "fab10ec5bdffc1979d41aabbb1d0cea4640b1ae3040b801f8a23f01d6f04a1ea"
    dimensions = 384
    max_tokens = 256  # as sentence-transformers reads it (max_seq_length); longer texts are cut

    def _loaded(self) -> Any:
        with _load_lock:
            if self.model not in _models:
                import onnxruntime
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
                tokenizer.enable_truncation(self.max_tokens)
                tokenizer.no_padding()
                options = onnxruntime.SessionOptions()
                # One thread a text: a short question embeds faster than on two threads, a memory as fast,
                # and many texts are embedded side by side instead (see embed_many; docs/benchmarks.md)
                options.intra_op_num_threads = 1  # (no pool of threads, so none to spin between calls)
                options.log_severity_level = 3  # its warnings are not the user's to act on
                session = onnxruntime.InferenceSession(str(self.folder / "model.onnx"), options,
                                                       providers=["CPUExecutionProvider"])
                _models[self.model] = (tokenizer, session)
            return _models[self.model]

    def __call__(self, text: str) -> Sequence[float]:
        return self.embed_many([text])[0]

    def embed_many(self, texts: Sequence[str]) -> Any:
        """The vectors of many texts (a numpy array, one row a text, normalised).

        One text a run: the int8 model scales each run's activations by their
        largest value, so a text run beside others (padded to the longest) would
        get a vector depending on them (cosine 0.98 with its own). Batches were
        not much faster (docs/benchmarks.md). Runs go side by side, one a core,
        rather than one at a time on every core.
        """
        import numpy

        tokenizer, session = self._loaded()
        vectors = numpy.empty((len(texts), self.dimensions), dtype=numpy.float32)

        def embed(i: int) -> None:
            ids = numpy.array([tokenizer.encode(texts[i]).ids], dtype=numpy.int64)
            vectors[i] = session.run(None, {"input_ids": ids, "attention_mask": numpy.ones_like(ids)})[0][0]

        workers = min(len(texts), _CORES)
        if workers < 2:
            for i in range(len(texts)):
                embed(i)
        else:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(embed, range(len(texts))))
        return vectors


class WordLlamaEmbedder:
    """WordLlama's l2_supercat model (cut to 128 dimensions), loaded offline on first use."""

    config = "l2_supercat"
    dimensions = 128

    def __init__(self) -> None:
        from importlib.metadata import version

        self.model = f"wordllama-{version('wordllama')}/{self.config}-{self.dimensions}"
        """The name vectors are cached under: another version of the model is embedded afresh."""

    def _loaded(self) -> Any:
        with _load_lock:
            if self.model not in _models:
                import wordllama

                folder = os.path.dirname(wordllama.__file__)
                _models[self.model] = wordllama.WordLlama.load(
                    self.config, cache_dir=folder, dim=256, trunc_dim=self.dimensions, disable_download=True)
            return _models[self.model]

    def __call__(self, text: str) -> Sequence[float]:
        return self._loaded().embed([text])[0]

    def embed_many(self, texts: Sequence[str]) -> Any:
        """The vectors of many texts at once (a numpy array, one row a text): much faster than one by one."""
        return self._loaded().embed(list(texts))


class LibraryEmbedder:
    """A model of one of :data:`LIBRARIES`, from a folder or the library's local cache, loaded on first use."""

    def __init__(self, library: str, source: str, where: str, download: bool) -> None:
        self.library, self.source, self.download = library, source, download
        if importlib.util.find_spec(LIBRARIES[library]) is None:
            raise ConfigError(f"{where}: {library}:{source} needs {library}, which is not installed; "
                              f"pip install {library}")
        self.folder: str | None = None
        # self.model names the vectors' cache: another model or revision is embedded afresh
        folder = Path(source).expanduser()
        if folder.is_dir():
            self.folder = str(folder.resolve())
            self.model = f"{library}:{self.folder}"
        elif source.startswith(("/", ".", "~")):
            raise ConfigError(f"{where}: {library}:{source}: no such folder")
        elif library == "fastembed":  # fastembed keeps its own cache, found when the model loads
            self.model = f"{library}:{source}"
        else:
            self.folder = _cached(library, source, where, download)
            self.model = f"{library}:{source}@{Path(self.folder).name}"  # the cached revision

    def _loaded(self) -> Any:
        with _load_lock:
            if self.model not in _models:
                _models[self.model] = self._load()
            return _models[self.model]

    def _load(self) -> Any:
        if self.library == "model2vec":
            from model2vec import StaticModel

            assert self.folder is not None  # (only fastembed keeps no folder)
            return StaticModel.from_pretrained(self.folder)
        if self.library == "sentence-transformers":
            from sentence_transformers import SentenceTransformer

            return SentenceTransformer(self.folder, device="cpu", local_files_only=True)
        from fastembed import TextEmbedding

        try:
            return TextEmbedding(self.source, local_files_only=not self.download)
        except Exception as exc:  # its own errors for a model it does not know or cannot find
            allow = "" if self.download else ("; memsite downloads a model only when allowed: set "
                                              "MEMSITE_EMBEDDING_DOWNLOAD=1 (or embedding.download: true) once")
            raise ConfigError(f"embedding model fastembed:{self.source} is not in fastembed's cache "
                              f"(FASTEMBED_CACHE_PATH) or could not be loaded ({type(exc).__name__}: "
                              f"{one_line(str(exc))[:300]}){allow}") from exc

    def __call__(self, text: str) -> Sequence[float]:
        return self.embed_many([text])[0]

    def embed_many(self, texts: Sequence[str]) -> Any:
        """The vectors of many texts at once (one row a text)."""
        model = self._loaded()
        if self.library == "fastembed":
            return list(model.embed(list(texts)))
        return model.encode(list(texts), show_progress_bar=False)  # not a bar on stderr at every recall


_ALLOW = ("memsite downloads a model only when allowed: set MEMSITE_EMBEDDING_DOWNLOAD=1 "
          "(or embedding.download: true) once, or name the model's folder")


def _cached(library: str, name: str, where: str, download: bool) -> str:
    """The folder of model ``name`` in Hugging Face's local cache (downloaded first when ``download``)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        raise ConfigError(f"{where}: {library}:{name} is not a folder, and huggingface_hub (to find it in the "
                          "model cache) is not installed; name the model's folder") from None
    try:
        return snapshot_download(name, local_files_only=not download)
    except Exception as exc:
        if not download:
            raise ConfigError(f"{where}: {library}:{name} is not in the local model cache ({HF_HUB_CACHE}); "
                              f"{_ALLOW}") from None
        raise ConfigError(f"{where}: {library}:{name} could not be downloaded "
                          f"({type(exc).__name__}: {one_line(str(exc))[:300]})") from exc


def normal(name: str) -> str:
    """A model name as written, its keyword or library part in lower case (a folder's case matters)."""
    library, colon, rest = name.strip().partition(":")
    return f"{library.lower()}:{rest}" if colon else library.lower()


def download_allowed(configured: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether models may be downloaded: ``MEMSITE_EMBEDDING_DOWNLOAD`` if set, else the configuration."""
    environ = os.environ if environ is None else environ
    value = (environ.get("MEMSITE_EMBEDDING_DOWNLOAD") or "").strip().lower()
    return value in TRUE if value else configured


RUNTIMES = {"minilm": ("onnxruntime", "tokenizers"), "wordllama": ("wordllama",)}
"""The packages each of memsite's own models needs."""


def installed(name: str) -> bool:
    """Whether the packages behind model ``name`` can be imported."""
    try:
        return name in RUNTIMES and all(importlib.util.find_spec(p) is not None for p in RUNTIMES[name])
    except (ImportError, ValueError):  # a broken install, or one hidden on purpose
        return False


def chosen_name(configured: str, environ: Mapping[str, str] | None = None) -> str:
    """The model name in force: ``MEMSITE_EMBEDDING`` if set, else the configured one."""
    environ = os.environ if environ is None else environ
    return normal(environ.get("MEMSITE_EMBEDDING") or "") or configured


def by_name(name: str, where: str = "embedder",
            download: bool = False) -> MiniLMEmbedder | WordLlamaEmbedder | LibraryEmbedder | None:
    """The embedder called ``name``; None for words only (``none``, or ``auto`` with neither model installed).

    Args:
        name: ``auto``, ``minilm``, ``wordllama``, ``none``, or ``<library>:<folder or model name>``.
        where: where the name was given, for errors.
        download: a named model not in the local cache may be downloaded.

    Raises:
        InvalidInput: an unknown name given as the ``embedder`` argument.
        ConfigError: an unknown name in the configuration or the environment;
            a library not installed; a model neither a folder nor in the local cache.
    """
    library, colon, source = name.partition(":")
    if colon and library in LIBRARIES and source:
        return LibraryEmbedder(library, source, where, download)
    if name == "auto":
        name = next((n for n in RUNTIMES if installed(n)), "none")
    if name == "none":
        return None
    if name in RUNTIMES:
        if not installed(name):
            missing = "onnxruntime or tokenizers is" if name == "minilm" else "wordllama is"
            install = "'memsite[embed]'" if name == "minilm" else "wordllama"
            raise ConfigError(f"{where}: {name}: {missing} not installed; pip install {install}, "
                              "or set the model to none")
        return MiniLMEmbedder() if name == "minilm" else WordLlamaEmbedder()
    expected = f"one of {', '.join(NAMES)}, or {', '.join(f'{k}:<model>' for k in LIBRARIES)}"
    if where == "embedder":  # an argument of MemoryStore
        raise InvalidInput(f"embedder: expected a callable (text -> vector) or {expected}, got {name!r}")
    raise ConfigError(f"{where}: expected {expected}, got {name!r}")
