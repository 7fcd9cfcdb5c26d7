# Every target sets itself up: a fresh clone needs nothing but python3 (3.11+) and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Re-install when pyproject.toml changes; the stamp lives inside the venv so `rm -rf .venv` resets all.
STAMP := $(VENV)/.installed

SHARED ?= $(abspath ../shared)
# Tests and benchmarks use the embedding model and data beside the checkout when present.
export MNEMO_TEST_MODEL_DIR ?= $(SHARED)/models/all-MiniLM-L6-v2/onnx
export TIKTOKEN_CACHE_DIR ?= $(SHARED)/models/tiktoken

.PHONY: run chat test lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/mnemo run

chat: $(STAMP)
	$(BIN)/mnemo chat

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check bot benchmarks plugins tests
	$(BIN)/ruff format --check bot benchmarks plugins tests

format: $(STAMP)
	$(BIN)/ruff check --fix bot benchmarks plugins tests
	$(BIN)/ruff format bot benchmarks plugins tests

bench: $(STAMP)
	$(BIN)/mnemo bench all

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
