"""`mnemo bench embedder`: texts per second for Mnemo's embedder and for Chroma's stock one.

Both run all-MiniLM-L6-v2 from the same ONNX file on the same texts at batch 64. Mnemo's
`OnnxEmbedder` pads each batch to its longest text; Chroma's `ONNXMiniLM_L6_V2` pads every
text to 256 tokens. The stock class only loads from `~/.cache/chroma/...`, so it runs in a
child process whose HOME is a temporary folder holding a link to the model: nothing is ever
downloaded. The vectors of both are compared too (they should agree to float precision).

This module also finds the model folder for every benchmark (`find_model_dir`).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.stats import REPO_ROOT, BenchError, rate, ratio
from benchmarks.vectors import synthetic_sentences
from bot.knowledge.embeddings import EmbedderError
from bot.knowledge.onnx_embedder import (
    LOCAL_MODEL_NAME,
    MODEL_FILES,
    OnnxEmbedder,
    chroma_cache_dir,
)

log = logging.getLogger(__name__)

BATCH_SIZE = 64
# The files Chroma's stock class checks for before deciding to download its archive.
STOCK_FILES = (
    "config.json",
    "model.onnx",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
)
_STOCK_TIMEOUT = 600.0


def _has_model(folder: Path) -> bool:
    return all((folder / name).is_file() for name in MODEL_FILES)


def find_model_dir(configured: Path | None = None) -> Path:
    """all-MiniLM-L6-v2's ONNX folder: the option, MNEMO_EMBEDDING_MODEL_DIR,
    MNEMO_TEST_MODEL_DIR, ../shared/models beside the checkout, then Chroma's cache.
    Never downloads: a missing model is a `BenchError`."""
    candidates: list[Path] = []
    if configured is not None:
        candidates.append(configured)
    for variable in ("MNEMO_EMBEDDING_MODEL_DIR", "MNEMO_TEST_MODEL_DIR"):
        if os.environ.get(variable):
            candidates.append(Path(os.environ[variable]))
    candidates += [
        REPO_ROOT.parent / "shared" / "models" / LOCAL_MODEL_NAME / "onnx",
        chroma_cache_dir(),
    ]
    for folder in candidates:
        if _has_model(folder):
            return folder
    tried = ", ".join(str(c) for c in candidates)
    raise BenchError(
        f"embedding model not found (tried {tried}): pass --model-dir or set "
        "MNEMO_EMBEDDING_MODEL_DIR to a folder with all-MiniLM-L6-v2's model.onnx and "
        "tokenizer.json"
    )


def local_embedder(model_dir: Path) -> OnnxEmbedder:
    try:
        return OnnxEmbedder(model_dir, batch_size=BATCH_SIZE)
    except EmbedderError as error:
        raise BenchError(str(error)) from None


async def _ours(model_dir: Path, texts: list[str], rounds: int) -> tuple[dict[str, Any], list]:
    embedder = local_embedder(model_dir)
    started = time.perf_counter()
    await embedder.load()
    load_seconds = time.perf_counter() - started
    await embedder.embed(texts[:BATCH_SIZE])  # warm-up: first runs allocate
    seconds = []
    vectors: list[list[float]] = []
    for _ in range(rounds):
        started = time.perf_counter()
        vectors = await embedder.embed(texts)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return {
        "texts": len(texts),
        "rounds": rounds,
        "load_seconds": round(load_seconds, 2),
        "seconds": round(median, 3),
        "texts_per_second": rate(len(texts), median),
        "threads": embedder.threads,
    }, vectors


# ---------------------------------------------------------------------------------------------
# Chroma's stock class, in a child process


def stock_worker(texts_path: str, vectors_path: str) -> None:
    """Run in the child: embed the texts with ONNXMiniLM_L6_V2, print timings as JSON."""
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    texts = json.loads(Path(texts_path).read_text(encoding="utf-8"))
    stock = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    folder = Path(stock.DOWNLOAD_PATH) / stock.EXTRACTED_FOLDER_NAME
    missing = [name for name in STOCK_FILES if not (folder / name).is_file()]
    if missing:  # the class would download its archive: refuse instead
        print(json.dumps({"error": f"{folder} lacks {', '.join(missing)}"}), flush=True)
        return
    started = time.perf_counter()
    stock(texts[:2])  # loads the tokenizer and the session
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    try:
        # `_forward` takes the batch size; calling the instance would use its default (32).
        vectors = stock._forward(texts, batch_size=BATCH_SIZE)
        batch = BATCH_SIZE
    except (AttributeError, TypeError):
        vectors = np.asarray(stock(texts))
        batch = 32
    seconds = time.perf_counter() - started
    np.save(vectors_path, np.asarray(vectors, dtype=np.float32))
    result = {"texts": len(texts), "batch": batch, "seconds": seconds, "load": load_seconds}
    print(json.dumps(result), flush=True)


def _stock_home(home: Path, model_dir: Path) -> None:
    """A HOME whose Chroma cache is a link to our model folder."""
    target = home / ".cache" / "chroma" / "onnx_models" / LOCAL_MODEL_NAME / "onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(model_dir.resolve(), target_is_directory=True)


def _stock(model_dir: Path, texts: list[str]) -> tuple[dict[str, Any], np.ndarray | None]:
    missing = [name for name in STOCK_FILES if not (model_dir / name).is_file()]
    if missing:
        return {"skipped": f"{model_dir} lacks {', '.join(missing)}"}, None
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-stock-") as folder:
        home = Path(folder) / "home"
        _stock_home(home, model_dir)
        texts_path = Path(folder) / "texts.json"
        vectors_path = Path(folder) / "vectors.npy"
        texts_path.write_text(json.dumps(texts), encoding="utf-8")
        # The worker imports `benchmarks`, which is not installed: it runs from this checkout.
        path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        env = {
            **os.environ,
            "HOME": str(home),
            "ANONYMIZED_TELEMETRY": "False",
            "PYTHONPATH": path,
        }
        code = (
            "import sys\nfrom benchmarks.embedder import stock_worker\n"
            "stock_worker(sys.argv[1], sys.argv[2])"
        )
        try:
            done = subprocess.run(
                [sys.executable, "-c", code, str(texts_path), str(vectors_path)],
                env=env,
                capture_output=True,
                text=True,
                timeout=_STOCK_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {_STOCK_TIMEOUT:.0f}s"}, None
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"exit code {done.returncode}: {tail}"}, None
        found = json.loads(lines[-1])
        if "error" in found:
            return {"error": found["error"]}, None
        vectors = np.load(vectors_path)
    return {
        "texts": found["texts"],
        "batch": found["batch"],
        "load_seconds": round(found["load"], 2),
        "seconds": round(found["seconds"], 3),
        "texts_per_second": rate(found["texts"], found["seconds"]),
    }, vectors


def agreement(ours: Sequence[Sequence[float]], stock: np.ndarray) -> dict[str, float]:
    """Cosine similarity of the two embedders' vectors for the same texts (unit vectors)."""
    count = min(len(ours), len(stock))
    mine = np.asarray(ours[:count], dtype=np.float32)
    cosines = np.sum(mine * stock[:count], axis=1)
    return {"mean": round(float(cosines.mean()), 6), "min": round(float(cosines.min()), 6)}


async def run_embedder(
    model_dir: Path, *, texts: int = 1024, stock_texts: int = 128, rounds: int = 3
) -> dict[str, Any]:
    """Throughput of both embedders at batch 64 on the same synthetic texts."""
    sample = synthetic_sentences(max(texts, stock_texts), seed=21)
    log.info("embedder: Mnemo's OnnxEmbedder on %d texts", texts)
    ours, our_vectors = await _ours(model_dir, sample[:texts], rounds)
    stock: dict[str, Any]
    if stock_texts > 0:
        log.info("embedder: Chroma's ONNXMiniLM_L6_V2 on %d texts (child process)", stock_texts)
        stock, stock_vectors = _stock(model_dir, sample[:stock_texts])
    else:
        stock, stock_vectors = {"skipped": "--stock-texts 0"}, None
    result: dict[str, Any] = {
        "model": LOCAL_MODEL_NAME,
        "batch_size": BATCH_SIZE,
        "mnemo": ours,
        "chroma_stock": stock,
    }
    if stock_vectors is not None:
        result["speed_ratio"] = ratio(ours["texts_per_second"], stock["texts_per_second"], digits=1)
        # The first `stock_texts` texts were embedded by both (ours embedded a superset).
        result["cosine_agreement"] = agreement(our_vectors, stock_vectors)
    return result
