"""The real all-MiniLM-L6-v2 on onnxruntime; only the remote edge (an inner embedder) is faked."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path

import numpy as np
import openai
import pytest

from bot.config.settings import EmbeddingSettings, ModelSettings
from bot.knowledge.embedder_factory import make_embedder
from bot.knowledge.embeddings import CachedEmbedder, Embedder, EmbedderError, OpenAIEmbedder
from bot.knowledge.onnx_embedder import OnnxEmbedder, locate_model_dir
from bot.llm.accounting import UsageLedger
from bot.testing.openai_server import FakeOpenAIServer, fake_embedding


@pytest.fixture(scope="module")
def embedder(model_dir: Path) -> OnnxEmbedder:
    # One session for the module: loading it is the slow part.
    return OnnxEmbedder(model_dir, threads=2)


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


async def test_paraphrases_are_closer_than_unrelated_texts(embedder: OnnxEmbedder) -> None:
    cat, kitten, market = await embedder.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Stock markets fell sharply after the interest rate decision.",
        ]
    )
    assert cosine(cat, kitten) > cosine(cat, market) + 0.3


async def test_vectors_have_384_unit_length_dimensions(embedder: OnnxEmbedder) -> None:
    vectors = await embedder.embed(["hello", "", "a much longer sentence about hiking " * 5])
    assert embedder.dimensions == 384
    for vector in vectors:
        assert len(vector) == 384
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-5)


async def test_dynamic_padding_matches_texts_embedded_alone(embedder: OnnxEmbedder) -> None:
    texts = [
        "hi",
        "Alice moved to Lisbon last spring and works remotely for a bakery startup.",
        "ok",
        "Bob's favourite food is ramen, especially the spicy kind from the shop near work.",
    ]
    together = np.array(await embedder.embed(texts))
    alone = np.array([(await embedder.embed([text]))[0] for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)


async def test_order_is_preserved_across_batches(model_dir: Path) -> None:
    small_batches = OnnxEmbedder(model_dir, batch_size=2, threads=1)
    texts = [
        "a fairly long sentence about the weather in the mountains today",
        "short",
        "medium length text about tea",
        "x",
        "another rather long sentence, this one about learning to play the violin",
    ]
    batched = np.array(await small_batches.embed(texts))
    for text, vector in zip(texts, batched, strict=True):
        alone = np.array((await small_batches.embed([text]))[0])
        np.testing.assert_allclose(vector, alone, atol=1e-4)


async def test_texts_longer_than_256_tokens_are_truncated(embedder: OnnxEmbedder) -> None:
    head = "word " * 300
    # Everything past token 256 is cut, so a different tail changes nothing.
    a, b = await embedder.embed([head + "apples", head + "a totally different ending"])
    np.testing.assert_allclose(a, b, atol=1e-6)


async def test_empty_input_records_nothing(model_dir: Path) -> None:
    ledger = UsageLedger()
    embedder = OnnxEmbedder(model_dir, ledger=ledger)
    assert await embedder.embed([]) == []
    assert ledger.embedding_calls == 0
    await embedder.embed(["one", "two"])
    assert (ledger.embedding_calls, ledger.embedded_texts) == (1, 2)


def test_locate_model_dir_prefers_the_configured_folder(model_dir: Path) -> None:
    assert locate_model_dir(model_dir) == model_dir


def test_locate_model_dir_finds_chromas_cache(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    cache.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        (cache / name).symlink_to(model_dir / name)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert locate_model_dir(tmp_path / "nowhere") == cache


@pytest.mark.parametrize("download", [True, False])
def test_locate_model_dir_fails_with_one_line(
    download: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    # chromadb's real download code runs, against a closed local port: it fails the way it
    # does offline, and a machine with internet does not fetch 80 MB during the tests.
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "MODEL_DOWNLOAD_URL", "http://127.0.0.1:9/onnx.tar.gz")
    with pytest.raises(EmbedderError) as raised:
        locate_model_dir(tmp_path / "bogus", download=download)
    message = str(raised.value)
    assert "MNEMO_EMBEDDING_MODEL_DIR" in message
    assert "\n" not in message


def test_onnx_embedder_rejects_a_folder_without_the_model(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="MNEMO_EMBEDDING_MODEL_DIR"):
        OnnxEmbedder(tmp_path)


class RecordingEmbedder:
    """A tiny inner embedder standing in for a remote model: records every call."""

    name = "recording"
    dimensions = 2

    def __init__(self, ledger: UsageLedger) -> None:
        self.calls: list[list[str]] = []
        self.ledger = ledger

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        self.ledger.record_embedding(len(texts))
        return [[float(len(text)), 1.0] for text in texts]


async def test_cache_sends_only_misses_in_one_call() -> None:
    ledger = UsageLedger()
    inner = RecordingEmbedder(ledger)
    cached: Embedder = CachedEmbedder(inner)

    first = await cached.embed(["alpha", "beta", "alpha"])
    second = await cached.embed(["beta", "gamma", "alpha"])

    assert inner.calls == [["alpha", "beta"], ["gamma"]]
    assert (ledger.embedding_calls, ledger.embedded_texts) == (2, 3)
    assert first == [[5.0, 1.0], [4.0, 1.0], [5.0, 1.0]]
    assert second == [[4.0, 1.0], [5.0, 1.0], [5.0, 1.0]]
    assert await cached.embed([]) == []
    assert len(inner.calls) == 2
    assert (cached.name, cached.dimensions) == ("recording", 2)


class SlowEmbedder(RecordingEmbedder):
    """Takes a moment, like a real model, so concurrent callers overlap."""

    async def embed(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0.05)
        return await super().embed(texts)


async def test_concurrent_callers_share_one_call_for_the_same_text() -> None:
    # The facts and recall providers run concurrently and both embed the message.
    ledger = UsageLedger()
    inner = SlowEmbedder(ledger)
    cached = CachedEmbedder(inner)
    first, second, third = await asyncio.gather(
        cached.embed(["hello there"]),
        cached.embed(["hello there"]),
        cached.embed(["hello there", "other"]),
    )
    assert first == second == [[11.0, 1.0]]
    assert third == [[11.0, 1.0], [5.0, 1.0]]
    assert inner.calls == [["hello there", "other"]]
    assert ledger.embedding_calls == 1


async def test_texts_arriving_during_a_call_go_together_in_the_next_one() -> None:
    inner = SlowEmbedder(UsageLedger())
    cached = CachedEmbedder(inner)
    first = asyncio.create_task(cached.embed(["one"]))
    await asyncio.sleep(0.01)  # the first call is running now
    later = [asyncio.create_task(cached.embed([f"text {n}"])) for n in range(5)]
    await asyncio.gather(first, *later)
    assert inner.calls == [["one"], [f"text {n}" for n in range(5)]]
    assert [t.result() for t in later] == [[[6.0, 1.0]]] * 5


async def test_a_failed_call_fails_every_caller_waiting_on_it() -> None:
    class Broken(SlowEmbedder):
        async def embed(self, texts: list[str]) -> list[list[float]]:
            await asyncio.sleep(0.05)
            raise RuntimeError("model crashed")

    cached = CachedEmbedder(Broken(UsageLedger()))
    results = await asyncio.gather(cached.embed(["x"]), cached.embed(["x"]), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    # Nothing broken was cached: the next call tries again.
    with pytest.raises(RuntimeError):
        await cached.embed(["x"])


async def test_cache_evicts_the_least_recently_used() -> None:
    inner = RecordingEmbedder(UsageLedger())
    cached = CachedEmbedder(inner, max_entries=2)
    await cached.embed(["a", "b"])
    await cached.embed(["a"])  # "a" is now the most recent
    await cached.embed(["c"])  # evicts "b"
    await cached.embed(["a", "b"])
    assert inner.calls == [["a", "b"], ["c"], ["b"]]


async def test_cached_vectors_cannot_be_corrupted_by_callers() -> None:
    cached = CachedEmbedder(RecordingEmbedder(UsageLedger()))
    (vector,) = await cached.embed(["text"])
    vector[0] = 99.0
    assert await cached.embed(["text"]) == [[4.0, 1.0]]


async def test_cached_onnx_embedder_counts_one_model_call(model_dir: Path) -> None:
    ledger = UsageLedger()
    cached = CachedEmbedder(OnnxEmbedder(model_dir, ledger=ledger))
    first = await cached.embed(["Carol plays chess on Sundays."])
    again = await cached.embed(["Carol plays chess on Sundays."])
    assert first == again
    assert (ledger.embedding_calls, ledger.embedded_texts) == (1, 1)


def test_make_embedder_local(model_dir: Path) -> None:
    settings = EmbeddingSettings(_env_file=None, model="local", model_dir=model_dir, batch_size=8)  # type: ignore[call-arg]
    embedder = make_embedder(settings, ModelSettings(_env_file=None), None)  # type: ignore[call-arg]
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, OnnxEmbedder)
    assert embedder.inner.batch_size == 8
    assert (embedder.name, embedder.dimensions) == ("all-MiniLM-L6-v2", 384)


def _loads(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith("loaded all-MiniLM-L6-v2"))


async def test_a_twin_shares_the_loaded_model_and_counts_into_its_own_ledger(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first_ledger, second_ledger = UsageLedger(), UsageLedger()
    first = OnnxEmbedder(model_dir, ledger=first_ledger)
    twin = first.counting_into(second_ledger)
    with caplog.at_level(logging.INFO, logger="bot.knowledge.onnx_embedder"):
        (alone,) = await first.embed(["hello"])
        again, _ = await twin.embed(["hello", "there"])
    # One model load for both; each call counted where its app counts.
    assert _loads(caplog) == 1
    assert (first_ledger.embedding_calls, first_ledger.embedded_texts) == (1, 1)
    assert (second_ledger.embedding_calls, second_ledger.embedded_texts) == (1, 2)
    np.testing.assert_allclose(alone, again, atol=1e-6)


async def test_make_embedder_uses_a_loaded_model_only_when_the_settings_name_it(
    model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loaded = OnnxEmbedder(model_dir, batch_size=8)
    await loaded.load()
    ledger = UsageLedger()
    same = EmbeddingSettings(_env_file=None, model="local", model_dir=model_dir, batch_size=8)  # type: ignore[call-arg]
    other = EmbeddingSettings(_env_file=None, model="local", model_dir=model_dir, batch_size=4)  # type: ignore[call-arg]
    with caplog.at_level(logging.INFO, logger="bot.knowledge.onnx_embedder"):
        shared = make_embedder(same, ModelSettings(_env_file=None), ledger, loaded=loaded)  # type: ignore[call-arg]
        await shared.embed(["a text"])
        assert _loads(caplog) == 0
        assert ledger.embedding_calls == 1
        # Another batch size is another embedder: it loads its own copy.
        separate = make_embedder(other, ModelSettings(_env_file=None), None, loaded=loaded)  # type: ignore[call-arg]
        await separate.embed(["a text"])
        assert _loads(caplog) == 1


def test_make_embedder_remote_without_endpoint_fails_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = EmbeddingSettings(_env_file=None, model="text-embedding-3-small")  # type: ignore[call-arg]
    with pytest.raises(EmbedderError, match="MNEMO_EMBEDDING_MODEL=local"):
        make_embedder(settings, ModelSettings(_env_file=None), None)  # type: ignore[call-arg]


async def test_openai_embedder_against_fake_server_keeps_order_and_counts_calls() -> None:
    ledger = UsageLedger()
    async with FakeOpenAIServer(embedding_dimensions=16) as server:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
        embedder = OpenAIEmbedder(client, "text-embedding-3-small", ledger, batch_size=2)
        texts = ["alpha", "beta", "gamma", "alpha"]
        vectors = await embedder.embed(texts)
        await client.close()
        requests = server.embedding_requests
    # Order is preserved across batches, and equal texts get equal vectors.
    assert vectors == [fake_embedding(t, 16) for t in texts]
    assert len(requests) == 2
    assert ledger.embedding_calls == 1 and ledger.embedded_texts == 4
