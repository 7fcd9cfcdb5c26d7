"""Choose the embedder from settings: the local ONNX model, or an OpenAI embedding model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.knowledge.embeddings import CachedEmbedder, Embedder, EmbedderError, OpenAIEmbedder
from bot.knowledge.onnx_embedder import OnnxEmbedder, locate_model_dir

if TYPE_CHECKING:
    import openai

    from bot.config.settings import EmbeddingSettings, ModelSettings
    from bot.llm.accounting import UsageLedger


def make_embedder(
    embedding: EmbeddingSettings,
    model: ModelSettings,
    ledger: UsageLedger | None,
    *,
    loaded: OnnxEmbedder | None = None,
) -> Embedder:
    """`local` → all-MiniLM-L6-v2 on onnxruntime; any other name → that OpenAI model. Cached.

    `loaded`: a local model already loaded in this process, used (counting into `ledger`)
    when it is the one the settings name, instead of loading another."""
    inner: Embedder
    if embedding.model == "local":
        folder = locate_model_dir(embedding.model_dir)
        if loaded is not None and (loaded.model_dir.resolve(), loaded.batch_size) == (
            folder.resolve(),
            embedding.batch_size,
        ):
            inner = loaded.counting_into(ledger)
        else:
            inner = OnnxEmbedder(folder, batch_size=embedding.batch_size, ledger=ledger)
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
