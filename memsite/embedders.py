"""Embedders memsite knows by name, for hybrid recall without writing one.

``wordllama`` (the ``memsite[embed]`` extra) ships its weights and tokenizer
inside its wheel: about 0.1 ms a text on a CPU, no network. Its vectors are
cut to their first 128 of 256 dimensions (the model is trained so that a
prefix is a smaller embedding): on bench/data it found as many paraphrases
(65% against 66% at 256; 54% at 64), and recall compares half the bytes.
Its default ``WordLlama.load()`` still tries to download the tokenizer (it
looks for ``tokenizer/`` while the wheel has ``tokenizers/``), so it is loaded
with its own package folder as the cache and downloads disabled.

A name comes from ``MemoryStore(path, embedder="wordllama")``, from
``MEMSITE_EMBEDDING``, or from ``extra.memsite.embedding.model`` in
``mkdocs.yml``, in that order. ``auto`` (the default) means wordllama when it
is installed and words only when it is not, so a base install recalls exactly
as before; ``none`` means words only.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ConfigError, InvalidInput

NAMES = ("auto", "wordllama", "none")
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


def installed(name: str) -> bool:
    """Whether the package behind model ``name`` can be imported."""
    try:
        return name == "wordllama" and importlib.util.find_spec("wordllama") is not None
    except (ImportError, ValueError):  # a broken install, or one hidden on purpose
        return False


def chosen_name(configured: str, environ: Mapping[str, str] | None = None) -> str:
    """The model name in force: ``MEMSITE_EMBEDDING`` if set, else the configured one."""
    environ = os.environ if environ is None else environ
    return (environ.get("MEMSITE_EMBEDDING") or "").strip().lower() or configured


def by_name(name: str, where: str = "embedder") -> WordLlamaEmbedder | None:
    """The embedder called ``name``; None for words only (``none``, or ``auto`` without wordllama).

    Raises:
        InvalidInput: an unknown name given as the ``embedder`` argument.
        ConfigError: an unknown name in the configuration or the environment;
            ``wordllama`` asked for but not installed.
    """
    if name == "none" or (name == "auto" and not installed("wordllama")):
        return None
    if name in ("auto", "wordllama"):
        if not installed("wordllama"):
            raise ConfigError(f"{where}: wordllama is not installed; pip install 'memsite[embed]', "
                              "or set the model to none")
        return WordLlamaEmbedder()
    if where == "embedder":  # an argument of MemoryStore
        raise InvalidInput(f"embedder: expected a callable (text -> vector) or one of {', '.join(NAMES)}, "
                           f"got {name!r}")
    raise ConfigError(f"{where}: expected one of {', '.join(NAMES)}, got {name!r}")
