"""The local embedder: all-MiniLM-L6-v2 on onnxruntime, and where its files are found.

The model folder is the configured one, else Chroma's cache, else Chroma's cache after
chromadb downloads the model there (Mnemo ships no weights). Vectors are identical to
sentence-transformers' and Chroma's for the same model.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.knowledge.embeddings import EmbedderError

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer

    from bot.llm.accounting import UsageLedger

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


@dataclass
class _Session:
    """The loaded model and the lock that serialises its use: one per loaded model, shared by
    every embedder `counting_into` made from it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    model: _LoadedModel | None = None


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime: mean pooling over the attention mask, L2-normalised.

    Each batch is padded only to its longest text, and texts are sorted by length before
    batching so that batches hold texts of similar length. The session loads on first use in a
    worker thread and is reused; inference is serialised so concurrent calls do not fight over
    the same cores. `counting_into` shares the loaded session with another app's ledger.
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
        self._session = _Session()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = await asyncio.to_thread(self._embed_sync, list(texts))
        if self._ledger is not None:
            self._ledger.record_embedding(len(texts))
        return vectors

    def counting_into(self, ledger: UsageLedger | None) -> OnnxEmbedder:
        """The same model, loaded once, counting its calls into `ledger`: the session is
        read-only and its use serialised, so apps in one process (a test run boots hundreds)
        need not load a copy each."""
        twin = OnnxEmbedder(
            self.model_dir,
            batch_size=self.batch_size,
            max_tokens=self.max_tokens,
            threads=self.threads,
            ledger=ledger,
        )
        twin._session = self._session
        return twin

    async def load(self) -> None:
        """Load the session now (e.g. at start-up) instead of on the first `embed`."""
        await asyncio.to_thread(self._ensure_loaded)

    def _embed_sync(self, texts: list[str]) -> list[list[float]]:
        with self._session.lock:
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
        with self._session.lock:
            return self._ensure_loaded_locked()

    def _ensure_loaded_locked(self) -> _LoadedModel:
        if self._session.model is None:
            self._session.model = self._load_model()
        return self._session.model

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
    normalised: np.ndarray = (pooled / norms).astype(np.float32)
    return normalised
