"""Embedders memsite knows by name, for hybrid recall without writing one.

``wordllama`` (the ``memsite[embed]`` extra) ships its weights and tokenizer
inside its wheel and runs on a CPU, with no network. Its vectors are
cut to their first 128 of 256 dimensions (the model is trained so that a
prefix is a smaller embedding): on bench/data it found as many paraphrases
(65% against 66% at 256; 54% at 64), and recall compares half the bytes.
Its default ``WordLlama.load()`` still tries to download the tokenizer (it
looks for ``tokenizer/`` while the wheel has ``tokenizers/``), so it is loaded
with its own package folder as the cache and downloads disabled.

A name comes from ``MemoryStore(path, embedder="wordllama")``, from
``MEMSITE_EMBEDDING``, or from ``plugins.memsite.embedding.model`` in
``mkdocs.yml``, in that order. ``auto`` (the default) means wordllama when it
is installed and words only when it is not, so a base install recalls exactly
as before; ``none`` means words only.

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
from pathlib import Path
from typing import Any

from .core import TRUE
from .errors import ConfigError, InvalidInput
from .model import one_line

NAMES = ("auto", "wordllama", "none")
LIBRARIES = {"model2vec": "model2vec", "sentence-transformers": "sentence_transformers", "fastembed": "fastembed"}
"""Libraries whose models can be named ``<library>:<folder or model name>``, and their import names."""
_load_lock = threading.Lock()
_models: dict[str, Any] = {}  # one loaded model per process, shared by every store


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
        return self._loaded().embed([text])[0]  # type: ignore[no-any-return]

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
        return self.embed_many([text])[0]  # type: ignore[no-any-return]

    def embed_many(self, texts: Sequence[str]) -> Any:
        """The vectors of many texts at once (one row a text)."""
        model = self._loaded()
        if self.library == "fastembed":
            return list(model.embed(list(texts)))
        return model.encode(list(texts))


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
        return snapshot_download(name, local_files_only=not download)  # type: ignore[no-any-return]
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


def installed(name: str) -> bool:
    """Whether the package behind model ``name`` can be imported."""
    try:
        return name == "wordllama" and importlib.util.find_spec("wordllama") is not None
    except (ImportError, ValueError):  # a broken install, or one hidden on purpose
        return False


def chosen_name(configured: str, environ: Mapping[str, str] | None = None) -> str:
    """The model name in force: ``MEMSITE_EMBEDDING`` if set, else the configured one."""
    environ = os.environ if environ is None else environ
    return normal(environ.get("MEMSITE_EMBEDDING") or "") or configured


def by_name(name: str, where: str = "embedder", download: bool = False) -> WordLlamaEmbedder | LibraryEmbedder | None:
    """The embedder called ``name``; None for words only (``none``, or ``auto`` without wordllama).

    Args:
        name: ``auto``, ``wordllama``, ``none``, or ``<library>:<folder or model name>``.
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
    if name == "none" or (name == "auto" and not installed("wordllama")):
        return None
    if name in ("auto", "wordllama"):
        if not installed("wordllama"):
            raise ConfigError(f"{where}: wordllama is not installed; pip install 'memsite[embed]', "
                              "or set the model to none")
        return WordLlamaEmbedder()
    expected = f"one of {', '.join(NAMES)}, or {', '.join(f'{k}:<model>' for k in LIBRARIES)}"
    if where == "embedder":  # an argument of MemoryStore
        raise InvalidInput(f"embedder: expected a callable (text -> vector) or {expected}, got {name!r}")
    raise ConfigError(f"{where}: expected {expected}, got {name!r}")
