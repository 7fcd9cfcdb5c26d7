"""Shared fixtures. Real parts only: the bundled MongoDB server over the wire, a real Chroma,
the real ONNX embedding model (from ../shared in CI, or MNEMO_TEST_MODEL_DIR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The all-MiniLM-L6-v2 ONNX folder; tests that need it skip with a reason when absent."""
    configured = os.environ.get("MNEMO_TEST_MODEL_DIR")
    candidates = [Path(configured)] if configured else []
    candidates.append(REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2" / "onnx")
    for candidate in candidates:
        if (candidate / "model.onnx").exists():
            return candidate
    pytest.skip("embedding model not found: set MNEMO_TEST_MODEL_DIR to the ONNX folder")
