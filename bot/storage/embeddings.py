"""Embedders: all-MiniLM-L6-v2 on onnxruntime (default) or an OpenAI embedding model.

`make_embedder(settings...)` picks one from the settings and wraps it in an LRU cache.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import onnxruntime
    import openai
    from tokenizers import Tokenizer

    from bot.config import EmbeddingSettings, ModelSettings
    from bot.llm.usage import UsageLedger

logger = logging.getLogger(__name__)

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_FILES = ("model.onnx", "tokenizer.json")
# sentence-transformers (and Chroma) cut all-MiniLM-L6-v2 at 256 tokens, although the tokenizer
# file says 128; 256 keeps our vectors identical to theirs.
MAX_TOKENS = 256
_MODEL_DIR_HINT = (
    "set MNEMO_EMBEDDING_MODEL_DIR to a folder holding all-MiniLM-L6-v2's model.onnx and "
    "tokenizer.json"
)
# Published output sizes, so `dimensions` is right before the first call.
_OPENAI_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class EmbedderError(Exception):
    """The embedder cannot be set up; the message is one line meant for the operator."""


class Embedder(Protocol):
    """Read-only `name` and `dimensions`, so plain attributes and properties both satisfy it."""

    @property
    def name(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order. Never blocks the event loop."""
        ...


# ---------------------------------------------------------------------------------------------
# Finding the local model


def chroma_cache_dir() -> Path:
    """Where Chroma's ONNXMiniLM_L6_V2 keeps the model. Computed per call from $HOME, because
    Chroma's own class attribute is frozen at import time."""
    return Path.home() / ".cache" / "chroma" / "onnx_models" / LOCAL_MODEL_NAME / "onnx"


def _has_model(folder: Path) -> bool:
    return all((folder / name).is_file() for name in MODEL_FILES)


def _download_with_chroma(target: Path) -> None:
    """Let chromadb's stock embedding function download and unpack its archive into `target`.

    Raises whatever chromadb raises (no network, bad checksum, missing tqdm ...).
    """
    # Imported here: chromadb is heavy and this path runs at most once, on a fresh machine.
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    stock = ONNXMiniLM_L6_V2()
    # The class attribute was computed from $HOME when chromadb was imported; pin it to ours.
    stock.DOWNLOAD_PATH = target.parent
    stock._download_model_if_not_exists()


def locate_model_dir(configured: Path | None, *, download: bool = True) -> Path:
    """The folder with model.onnx and tokenizer.json: the configured one, else Chroma's cache,
    else (if `download`) Chroma's cache after letting chromadb download the model there.
    `EmbedderError` otherwise."""
    if configured is not None:
        if _has_model(configured):
            return configured
        logger.warning(
            "MNEMO_EMBEDDING_MODEL_DIR=%s lacks %s; trying Chroma's cache",
            configured,
            " or ".join(MODEL_FILES),
        )
    cache = chroma_cache_dir()
    if _has_model(cache):
        return cache
    if download:
        _try_download(cache)
        if _has_model(cache):
            return cache
    raise EmbedderError(f"embedding model not found: {_MODEL_DIR_HINT}")


def _try_download(cache: Path) -> None:
    logger.info("embedding model not in %s; asking chromadb to download it", cache)
    try:
        _download_with_chroma(cache)
    except Exception as error:  # chromadb raises httpx, OS and ValueError errors alike
        reason = str(error).splitlines()[0] if str(error) else ""
        logger.warning(
            "chromadb could not download the model: %s: %s", type(error).__name__, reason
        )


# ---------------------------------------------------------------------------------------------
# Local ONNX model


def _default_threads() -> int:
    # Affinity respects taskset/cgroup CPU pinning, which os.cpu_count() ignores on 3.11.
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    # Past 4 threads a 6-layer MiniLM on short texts gains little, and the rest of the process
    # (event loop, MongoDB, Chroma) needs cores too.
    return max(1, min(available, 4))


@dataclass
class _LoadedModel:
    session: onnxruntime.InferenceSession
    tokenizer: Tokenizer
    input_names: frozenset[str]
    output_name: str


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime: mean pooling over the attention mask, L2-normalised.

    Each batch is padded only to its longest text, and texts are sorted by length before
    batching so that batches hold texts of similar length. The session loads on first use in a
    worker thread and is reused; inference is serialised so concurrent calls do not fight over
    the same cores.
    """

    dimensions: int = 384

    def __init__(
        self,
        model_dir: Path,
        *,
        batch_size: int = 64,
        max_tokens: int = MAX_TOKENS,
        threads: int | None = None,
        ledger: UsageLedger | None = None,
    ) -> None:
        if not _has_model(model_dir):
            raise EmbedderError(
                f"{model_dir} lacks model.onnx or tokenizer.json: {_MODEL_DIR_HINT}"
            )
        if batch_size < 1 or max_tokens < 2:
            raise ValueError("batch_size must be >= 1 and max_tokens >= 2")
        self.name = LOCAL_MODEL_NAME
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.threads = threads or _default_threads()
        self._ledger = ledger
        self._model: _LoadedModel | None = None
        self._lock = threading.Lock()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = await asyncio.to_thread(self._embed_sync, list(texts))
        if self._ledger is not None:
            self._ledger.record_embedding(len(texts))
        return vectors

    async def load(self) -> None:
        """Load the session now (e.g. at start-up) instead of on the first `embed`."""
        await asyncio.to_thread(self._ensure_loaded)

    def _embed_sync(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            model = self._ensure_loaded_locked()
            # Similar lengths in a batch mean little padding; the order is restored below.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            result = np.empty((len(texts), self.dimensions), dtype=np.float32)
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                result[chunk] = self._forward(model, [texts[i] for i in chunk])
        return result.tolist()

    def _forward(self, model: _LoadedModel, batch: list[str]) -> np.ndarray:
        encodings = model.tokenizer.encode_batch(batch)
        input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
        attention_mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        # Some exports drop token_type_ids; feed only what the graph declares.
        inputs = {name: value for name, value in feeds.items() if name in model.input_names}
        (hidden,) = model.session.run([model.output_name], inputs)
        return _mean_pool_normalise(hidden, attention_mask)

    def _ensure_loaded(self) -> _LoadedModel:
        with self._lock:
            return self._ensure_loaded_locked()

    def _ensure_loaded_locked(self) -> _LoadedModel:
        if self._model is None:
            self._model = self._load_model()
        return self._model

    def _load_model(self) -> _LoadedModel:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        # One graph, run sequentially: inter-op threads would only add idle spinners.
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(
            str(self.model_dir / "model.onnx"),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        # The file pads to a fixed 128; without `length` the tokenizer pads to the batch's longest.
        padding: dict[str, Any] = tokenizer.padding or {}
        tokenizer.enable_padding(
            pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]")
        )
        outputs = [output.name for output in session.get_outputs()]
        output_name = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        logger.info("loaded %s from %s (%d threads)", self.name, self.model_dir, self.threads)
        return _LoadedModel(
            session=session,
            tokenizer=tokenizer,
            input_names=frozenset(i.name for i in session.get_inputs()),
            output_name=output_name,
        )


def _mean_pool_normalise(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    mask = attention_mask[:, :, np.newaxis].astype(np.float32)
    summed = (hidden * mask).sum(axis=1)
    pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
    # PyTorch's F.normalize epsilon, as sentence-transformers uses.
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return (pooled / norms).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible embeddings


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible `/embeddings` endpoint, `batch_size` texts a request.

    `dimensions` is the published size for known models, the requested size when given, and
    otherwise learnt from the first response (0 until then).
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        ledger: UsageLedger | None = None,
        *,
        batch_size: int = 256,
        dimensions: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.name = model
        self.dimensions = dimensions or _OPENAI_DIMENSIONS.get(model, 0)
        self._client = client
        self._ledger = ledger
        self._batch_size = batch_size
        # Only ask for a size when the caller chose one: older models reject the parameter.
        self._requested_dimensions = dimensions

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(await self._embed_batch(texts[start : start + self._batch_size]))
        if vectors and not self.dimensions:
            self.dimensions = len(vectors[0])
        if self._ledger is not None:
            self._ledger.record_embedding(len(texts))
        return vectors

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        # The API rejects empty strings; a lone space embeds as "nothing" just as well.
        inputs = [text if text.strip() else " " for text in batch]
        extra: dict[str, Any] = {}
        if self._requested_dimensions is not None:
            extra["dimensions"] = self._requested_dimensions
        response = await self._client.embeddings.create(
            model=self.name, input=inputs, encoding_format="float", **extra
        )
        if len(response.data) != len(batch):
            raise EmbedderError(
                f"{self.name}: asked for {len(batch)} embeddings, got {len(response.data)}"
            )
        # The API documents `index`; sorting by it keeps the order even if a server shuffles.
        ordered = sorted(response.data, key=lambda item: item.index)
        return [list(item.embedding) for item in ordered]


# ---------------------------------------------------------------------------------------------
# Cache


class CachedEmbedder:
    """An LRU cache by exact text in front of another embedder.

    A message is embedded when stored and again when the state is recomposed; the second time
    costs nothing. Misses (deduplicated) go to `inner` in a single call.
    """

    def __init__(self, inner: Embedder, max_entries: int = 4096, max_batch: int = 64) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.inner = inner
        self.max_entries = max_entries
        self.max_batch = max_batch
        self._queued: dict[str, asyncio.Future[tuple[float, ...]]] = {}
        self._batcher: asyncio.Task[None] | None = None
        # Tuples, so a caller mutating a returned list cannot corrupt the cache.
        self._entries: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._in_flight: dict[str, asyncio.Future[tuple[float, ...]]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    async def embed(self, texts: list[str]) -> list[list[float]]:
        found: dict[str, tuple[float, ...]] = {}
        waiting: dict[str, asyncio.Future[tuple[float, ...]]] = {}
        for text in texts:
            vector = self._entries.get(text)
            if vector is not None:
                self._entries.move_to_end(text)
                found[text] = vector
            elif text in self._in_flight:
                # Another caller is embedding this text right now (the providers run
                # concurrently and query with the same message): share its result.
                waiting[text] = self._in_flight[text]
        missing = list(dict.fromkeys(t for t in texts if t not in found and t not in waiting))
        self.hits += sum(1 for text in texts if text in found or text in waiting)
        self.misses += len(missing)
        if missing:
            await self._embed_missing(missing, found)
        for text, future in waiting.items():
            found[text] = await asyncio.shield(future)
        return [list(found[text]) for text in texts]

    async def _embed_missing(self, missing: list[str], found: dict[str, tuple[float, ...]]) -> None:
        """Queue the misses for the next model call and wait for their vectors.

        While a call runs, new misses wait and then go together in one batch (dynamic
        batching): under load, a thousand messages cost a few dozen batched calls instead of
        a thousand single-text ones, and a quiet bot still embeds each message at once.
        """
        loop = asyncio.get_running_loop()
        futures = {text: loop.create_future() for text in missing}
        self._in_flight.update(futures)
        self._queued.update(futures)
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._run_batches())
        for text, future in futures.items():
            found[text] = await asyncio.shield(future)

    async def _run_batches(self) -> None:
        while self._queued:
            batch = dict(list(self._queued.items())[: self.max_batch])
            for text in batch:
                del self._queued[text]
            try:
                fresh = await self.inner.embed(list(batch))
            except asyncio.CancelledError:
                # Shutting down: release every waiter rather than leave it hanging.
                for future in (*batch.values(), *self._queued.values()):
                    future.cancel()
                self._queued.clear()
                self._in_flight.clear()
                raise
            except Exception as error:
                for future in batch.values():
                    if not future.done():
                        future.set_exception(error)
                continue
            finally:
                for text in batch:
                    self._in_flight.pop(text, None)
            for (text, future), vector in zip(batch.items(), fresh, strict=True):
                self._remember(text, tuple(vector))
                if not future.done():
                    future.set_result(tuple(vector))

    def _remember(self, text: str, vector: tuple[float, ...]) -> None:
        self._entries[text] = vector
        self._entries.move_to_end(text)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


# ---------------------------------------------------------------------------------------------
# Factory


def make_embedder(
    embedding: EmbeddingSettings, model: ModelSettings, ledger: UsageLedger | None
) -> Embedder:
    """`local` → all-MiniLM-L6-v2 on onnxruntime; any other name → that OpenAI model. Cached."""
    inner: Embedder
    if embedding.model == "local":
        inner = OnnxEmbedder(
            locate_model_dir(embedding.model_dir), batch_size=embedding.batch_size, ledger=ledger
        )
    else:
        inner = OpenAIEmbedder(
            _openai_client(embedding.model, model),
            embedding.model,
            ledger,
            batch_size=embedding.batch_size,
        )
    return CachedEmbedder(inner)


def _openai_client(embedding_model: str, model: ModelSettings) -> openai.AsyncOpenAI:
    import openai

    if model.offline:
        raise EmbedderError(
            f"MNEMO_EMBEDDING_MODEL={embedding_model} needs OPENAI_API_KEY or OPENAI_BASE_URL; "
            "set MNEMO_EMBEDDING_MODEL=local to embed offline"
        )
    key = model.openai_api_key.get_secret_value() if model.openai_api_key is not None else None
    return openai.AsyncOpenAI(
        # Self-hosted OpenAI-compatible servers often need no key, but the client insists on one.
        api_key=key or "unused",
        base_url=model.openai_base_url,
        timeout=model.timeout_seconds,
        max_retries=model.max_retries,
    )
