"""Text encoders behind one interface, so an index or a method never depends on the embedding library.

Weights load on the first encode and are shared per process: Hydra instantiates one Embedder per
interpolation of the same config (a dense retriever, a fusion retriever, a method), and they must not
each hold a copy of the model.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from functools import cached_property
from itertools import islice
from typing import Any

import numpy as np

from hoprag.data.types import Passage
from hoprag.utils import progress
from hoprag.utils.bundled import resolve_model_ref
from hoprag.utils.device import resolve_device

log = logging.getLogger(__name__)

DEFAULT_PASSAGE_TEMPLATE = "{title}\n{text}"
_LABELLED_TEXT = re.compile(r"(?:^|\n)([^\n{}]*)\{text\}")  # the label a template puts before the text, on its line


def _text_label(template: str) -> str:
    """The label before `{text}` on its line ("Context: " in "Title: {title}\nContext: {text}"); "" for none."""
    match = _LABELLED_TEXT.search(template)
    return match.group(1) if match else ""

_MODELS: dict[Hashable, Any] = {}
_MODELS_LOCK = threading.Lock()
_DEVICE = re.compile(r"cpu|mps|(?:cuda|npu|xpu)(?::\d+)?")
DEVICES = "cpu, cuda, cuda:<n> (also mps, npu:<n>, xpu:<n>)"


def check_device(device: str) -> str:
    """`embedder.device` when it is "auto" (the GPU when torch sees one) or a device torch can name;
    ValueError otherwise, before any weights load."""
    if device == "auto" or _DEVICE.fullmatch(str(device)):
        return device
    raise ValueError(f"embedder.device={device!r} is not a device: give auto, {DEVICES}")


def pool_devices(devices: str | Sequence[str] | None) -> list[str] | None:
    """`embedder.devices` as a list of devices (None for none: the model runs on `embedder.device`): "all" is
    every CUDA GPU torch sees; every entry must be a device torch can name, and a CUDA one a GPU it sees."""
    if not devices:
        return None
    if devices == "all":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("embedder.devices=all: torch sees no CUDA GPU (leave embedder.devices null to encode on "
                             "embedder.device)")  # fmt: skip
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    listed = [devices] if isinstance(devices, str) else [str(d) for d in devices]
    unknown = [d for d in listed if not _DEVICE.fullmatch(d)]
    if unknown:
        raise ValueError(f"embedder.devices={listed}: {', '.join(unknown)} is not a device; give all, or a list "
                         f"of {DEVICES} such as [cuda:0,cuda:1]")  # fmt: skip
    _check_cuda_visible(listed)
    return listed


def _check_cuda_visible(devices: list[str]) -> None:
    """Refuse CUDA devices torch does not see (none on this machine, or a number past its GPUs)."""
    cuda = [d for d in devices if d.startswith("cuda")]
    if not cuda:
        return
    import torch

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = [d for d in cuda if visible <= int(d.partition(":")[2] or 0)]
    if missing:
        raise ValueError(f"embedder.devices names {', '.join(missing)}, but torch sees {visible} CUDA GPU(s)")


def encoding_devices(device: str, devices: list[str] | None) -> tuple[str, list[str] | None]:
    """(the device the loaded model sits on, the devices of a multi-process pool or None). Several `devices`
    encode in a pool, one process each, the model kept on the CPU meanwhile (each worker copies it to its
    device, in both libraries); one is that device, no pool; none is `device` ("auto": the GPU when torch
    sees one)."""
    if devices and len(devices) > 1:
        return "cpu", devices
    return resolve_device(devices[0] if devices else device), None


def _shared_model(key: Hashable, load: Callable[[], Any]) -> Any:
    """The process-wide model for `key`, loaded by `load()` the first time it is asked for."""
    with _MODELS_LOCK:
        if key not in _MODELS:
            log.info("loading embedding model %s", key)
            _MODELS[key] = load()
        return _MODELS[key]


class Embedder:
    """Maps queries and passages to float32 vectors of width `dim`, L2-normalised when `normalize`.

    Queries are prefixed with `query_prefix` (BGE's instruction, E5's "query: ") and passages are
    rendered with `passage_template`, because models are trained with (and indexes must be rebuilt for)
    these exact input forms. Subclasses implement `_encode` and provide `dim`.
    """

    name: str
    model: str
    dim: int
    pooling: str | None = None  # how token states become one vector, where the library says ("mean", "cls")
    truncated_passages: int | None = None  # of the last `passage_chunks` pass: passages cut at the token limit

    def __init__(
        self,
        name: str,
        model: str,
        normalize: bool = True,
        batch_size: int = 64,
        query_prefix: str = "",
        passage_template: str = DEFAULT_PASSAGE_TEMPLATE,
    ) -> None:
        self.name = name
        self.model = model
        self.normalize = normalize
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_template = passage_template

    def passage_text(self, p: Passage) -> str:
        """`passage_template` filled with the passage's title and text. A text that already holds, at a line's
        start, the label the template puts before it is not labelled twice: MultiHop-RAG's articles
        ("Source: …\nContext: …", TreeHop's form for that corpus) under "Title: {title}\nContext: {text}" read
        "Title: …\nSource: …\nContext: …"."""
        label = _text_label(self.passage_template)
        template = self.passage_template
        if label and (p.text.startswith(label) or f"\n{label}" in p.text):
            template = template.replace(label + "{text}", "{text}")
        return template.format(title=p.title, text=p.text)

    def encode_queries(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        return self._vectors([self.query_prefix + t for t in texts], batch_size)

    def encode_passages(self, passages: Sequence[Passage], batch_size: int | None = None) -> np.ndarray:
        return self._vectors([self.passage_text(p) for p in passages], batch_size)

    def passage_chunks(
        self,
        passages: Sequence[Passage],
        chunk_size: int = 2048,
        batch_size: int | None = None,
        show: bool | None = None,
    ) -> Iterator[tuple[list[Passage], np.ndarray]]:
        """Encode `passages` `chunk_size` at a time under one progress bar (`hoprag.utils.progress`; `show`
        None: its decision), yielding each chunk with its vectors: the path every corpus-sized encode takes,
        so none runs for minutes in silence. Chunks larger than a batch let the encoder sort texts by
        length, wasting less padding; the bar moves once the caller has used a chunk."""
        it = iter(passages)
        truncated = 0
        with progress.bar(total=len(passages), desc=f"encoding with {self.name}", unit="passage", show=show) as shown:
            while chunk := list(islice(it, chunk_size)):
                truncated += self.count_truncated([self.passage_text(p) for p in chunk])
                yield chunk, self.encode_passages(chunk, batch_size)
                shown.update(len(chunk))
        self.truncated_passages = truncated
        limit = self._token_limit()
        if limit is not None:
            log.log(logging.WARNING if truncated else logging.INFO,
                    "%s: %d of %d passages are longer than the %d tokens it reads and were cut to them",
                    self.name, truncated, len(passages), limit[1])  # fmt: skip

    def count_truncated(self, texts: Sequence[str]) -> int:
        """How many of `texts` the encoder cuts: longer than the tokens it reads (special tokens included);
        0 for one that reads whole texts. Texts too short to reach the limit in any tokenisation (4 tokens a
        character at most, a UTF-8 byte each) are not tokenised."""
        limit = self._token_limit()
        if limit is None:
            return 0
        tokenizer, max_tokens = limit
        long = [t for t in texts if 4 * len(t) + 2 > max_tokens]
        if not long:
            return 0
        ids = tokenizer(long, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return sum(len(i) > max_tokens for i in ids)

    def _token_limit(self) -> tuple[Any, int] | None:
        """(tokenizer, the tokens the encoder reads of a text), or None for an encoder that reads whole texts."""
        return None

    def describe(self) -> dict[str, Any]:
        """What determines the passage vectors: a saved index records it and is refused when it differs."""
        return {
            "embedder": self.name,
            "model": self.model,
            "normalize": self.normalize,
            "passage_template": self.passage_template,
        }

    def describe_encoding(self) -> dict[str, Any]:
        """What determines query and passage vectors alike (`describe()`, the query prefix, the pooling): a
        model trained on these vectors (TreeHop) records it and is refused with an embedder that differs."""
        return {**self.describe(), "query_prefix": self.query_prefix, "pooling": self.pooling}

    def _vectors(self, texts: list[str], batch_size: int | None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray(self._encode(texts, batch_size or self.batch_size), dtype=np.float32)
        vectors = vectors.reshape(len(texts), -1)
        if self.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r})"


class HashingEmbedder(Embedder):
    """Signed feature hashing of lower-cased words into `dim` buckets (blake2b, so the same vector in every
    process and on every machine): no weights, tens of thousands of passages per second on one core. For
    plumbing at scale (sharded builds, resume checks, memory), never for retrieval quality."""

    TOKEN = re.compile(r"\w+")
    CACHE_LIMIT = 1_000_000  # distinct words remembered; beyond it the cache restarts (bounded memory)

    def __init__(
        self,
        dim: int = 64,
        name: str = "hashing",
        normalize: bool = True,
        batch_size: int = 1024,
        query_prefix: str = "",
        passage_template: str = DEFAULT_PASSAGE_TEMPLATE,
    ) -> None:
        super().__init__(name, f"hashing-{dim}", normalize, batch_size, query_prefix, passage_template)
        self.dim = dim
        self._buckets: dict[str, int] = {}

    def _bucket(self, word: str) -> int:
        """The word's signed bucket + 1 (the sign says which way it counts; +1 keeps bucket 0 signed)."""
        found = self._buckets.get(word)
        if found is None:
            if len(self._buckets) >= self.CACHE_LIMIT:
                self._buckets.clear()
            h = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")
            found = self._buckets[word] = (h % self.dim + 1) * (1 if h >> 63 else -1)
        return found

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        cells, signs = [], []
        for row, text in enumerate(texts):
            for word in self.TOKEN.findall(text.lower()):
                bucket = self._bucket(word)
                cells.append(row * self.dim + abs(bucket) - 1)
                signs.append(1.0 if bucket > 0 else -1.0)
        counts = np.bincount(np.asarray(cells, dtype=np.int64), weights=signs, minlength=len(texts) * self.dim)
        return counts.reshape(len(texts), self.dim).astype(np.float32)


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model (its own pooling and normalisation config apply, e.g. MiniLM's mean).

    `model` is a local folder, a hub id or a `pkg://` reference to a model shipped in a package.
    `devices` (e.g. ["cuda:0", "cuda:1"], or "all": every GPU torch sees) encodes through the library's
    multi-process pool, one process per device, started on first use and stopped at exit: every GPU of a
    machine for one index build (`encoding_devices`). It replaces `device`; the vectors are the same.
    """

    def __init__(
        self,
        model: str,
        name: str | None = None,
        device: str = "auto",
        normalize: bool = True,
        batch_size: int = 64,
        max_length: int | None = None,
        query_prefix: str = "",
        passage_template: str = DEFAULT_PASSAGE_TEMPLATE,
        devices: str | Sequence[str] | None = None,
    ) -> None:
        super().__init__(name or model, model, normalize, batch_size, query_prefix, passage_template)
        self.device = check_device(device)
        self.max_length = max_length
        self.devices = pool_devices(devices)

    @property
    def dim(self) -> int:
        return self._load().get_embedding_dimension()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_length": self.max_length}

    @property
    def pooling(self) -> str | None:  # type: ignore[override]
        """The model's own pooling ("mean" for MiniLM and E5, "cls" for BGE), read from its Pooling module."""
        for module in self._load():
            mode = getattr(module, "pooling_mode", None)
            if mode is not None:
                return mode if isinstance(mode, str) else "+".join(mode)
        return None

    def _load(self) -> Any:
        path, device = resolve_model_ref(self.model), encoding_devices(self.device, self.devices)[0]

        def load() -> Any:
            from sentence_transformers import SentenceTransformer

            st = SentenceTransformer(path, device=device)
            if self.max_length is not None:
                st.max_seq_length = self.max_length
            return st

        return _shared_model(("sentence-transformers", path, device, self.max_length), load)

    def _token_limit(self) -> tuple[Any, int] | None:
        model = self._load()  # max_seq_length: this embedder's max_length, else the model's own
        return (model.tokenizer, model.max_seq_length) if model.max_seq_length else None

    def _pool(self) -> dict[str, Any] | None:
        """The process-wide multi-process pool over `devices` (None without several)."""
        devices = encoding_devices(self.device, self.devices)[1]
        if devices is None:
            return None
        model = self._load()

        def start() -> dict[str, Any]:
            pool = model.start_multi_process_pool(devices)
            atexit.register(model.stop_multi_process_pool, pool)
            return pool

        return _shared_model(("sentence-transformers pool", self.model, tuple(devices), self.max_length), start)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self._load().encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=False,
            pool=self._pool(),
        )


class FlagEmbedder(Embedder):
    """A FlagEmbedding model: BGE-M3 dense vectors when the model is a bge-m3, else `FlagModel`.

    FlagModel pools with `pooling_method` (CLS by default, as BGE is trained); a mean-pooled model such
    as MiniLM must say pooling_method="mean". Normalisation is done here, not by FlagEmbedding, so one
    loaded model serves embedders that differ only in `normalize`. `devices` as for
    `SentenceTransformerEmbedder`: several encode through FlagEmbedding's own multi-process pool (the model
    is given them all and starts its pool on the first encode), stopped at exit.
    """

    def __init__(
        self,
        model: str,
        name: str | None = None,
        device: str = "auto",
        normalize: bool = True,
        batch_size: int = 64,
        max_length: int = 512,
        pooling_method: str = "cls",
        use_fp16: bool = False,
        query_prefix: str = "",
        passage_template: str = DEFAULT_PASSAGE_TEMPLATE,
        devices: str | Sequence[str] | None = None,
    ) -> None:
        super().__init__(name or model, model, normalize, batch_size, query_prefix, passage_template)
        self.device = check_device(device)
        self.devices = pool_devices(devices)
        self.max_length = max_length
        self.pooling_method = pooling_method
        self.use_fp16 = use_fp16
        self.is_m3 = "bge-m3" in model.lower()

    @cached_property
    def dim(self) -> int:
        """The encoder's hidden size (FlagEmbedding pools without a projection), read from its config."""
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(resolve_model_ref(self.model)).hidden_size

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_length": self.max_length, "pooling_method": self.pooling_method}

    @property
    def pooling(self) -> str:  # type: ignore[override]
        return self.pooling_method

    def _load(self) -> Any:
        path, (device, pool) = resolve_model_ref(self.model), encoding_devices(self.device, self.devices)
        devices = pool or [device]

        def load() -> Any:
            try:
                from FlagEmbedding import BGEM3FlagModel, FlagModel
            except ImportError as err:  # its package init imports every reranker, each pinned to transformers internals
                import transformers

                raise ImportError(
                    f"FlagEmbedding cannot be imported with transformers {transformers.__version__} ({err}); "
                    "install the transformers range that pyproject.toml pins"
                ) from err

            model = (BGEM3FlagModel if self.is_m3 else FlagModel)(
                path,
                normalize_embeddings=False,
                use_fp16=self.use_fp16,
                pooling_method=self.pooling_method,
                devices=devices,
            )
            if pool:
                atexit.register(model.stop_self_pool)
            return model

        key = ("flagembedding", path, tuple(devices), self.is_m3, self.pooling_method, self.use_fp16)
        return _shared_model(key, load)

    def _token_limit(self) -> tuple[Any, int] | None:
        return self._load().tokenizer, self.max_length

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        model = self._load()
        if self.is_m3:
            out = model.encode(
                texts,
                batch_size=batch_size,
                max_length=self.max_length,
                return_dense=True,
                return_sparse=False,
                return_colbert_vecs=False,
            )
            return out["dense_vecs"]
        return model.encode(texts, batch_size=batch_size, max_length=self.max_length)
