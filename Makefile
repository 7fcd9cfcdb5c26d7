# Every target sets itself up: a fresh clone needs nothing but python3 (3.11+) and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# One stamp per set of extras, inside the venv so `rm -rf .venv` resets all. Running needs the
# runtime dependencies only; the test and benchmark tools (pytest, ruff, matplotlib, tiktoken)
# are added by the targets that use them. Each stamp is redone when pyproject.toml or the lock
# changes. Every install takes its versions from constraints.txt (the lock: the exact versions
# the tests passed with), so a clone installs the same stack next month; `make lock` refreshes it.
LOCK := constraints.txt
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
STAMP_BENCH := $(VENV)/.installed-bench
# `make run REUSE_VENV=1` runs with the venv as it is, installing nothing. The README tests run
# `make run` in a throw-away copy of the checkout with CI's venv: an editable re-install from
# the copy would point that venv at a folder deleted after the test.
ifdef REUSE_VENV
STAMP_RUN :=
STAMP_TEST :=
STAMP_BENCH :=
endif

SHARED ?= $(abspath ../shared)
# Tests and benchmarks use the embedding model and data beside the checkout when present.
export MNEMO_TEST_MODEL_DIR ?= $(SHARED)/models/all-MiniLM-L6-v2/onnx
export TIKTOKEN_CACHE_DIR ?= $(SHARED)/models/tiktoken
# `make run` on a machine without internet: chromadb cannot download the embedding model, so use
# the copy beside the checkout when there is one (elsewhere it is downloaded once into Chroma's
# cache). An MNEMO_EMBEDDING_MODEL_DIR in the environment or in .env still wins.
ifneq ($(wildcard $(MNEMO_TEST_MODEL_DIR)/model.onnx),)
ifeq ($(MNEMO_EMBEDDING_MODEL_DIR),)
ifeq ($(shell grep -s '^MNEMO_EMBEDDING_MODEL_DIR=' .env),)
export MNEMO_EMBEDDING_MODEL_DIR := $(MNEMO_TEST_MODEL_DIR)
endif
endif
endif

.PHONY: run chat doctor test lint format bench bench-live clean lock messages

# pip comes from the lock too (`make lock` records the one it ran), and builds Mnemo's editable
# install with the lock's setuptools (--build-constraint, a pip 25.3 option): next month's pip or
# setuptools changes nothing here. The new venv's own pip only installs the lock's pip.
# setuptools' "Editable installation" notice (a warning block about folders that shadow the
# package, which is the checkout's layout) is silenced: a newcomer need not learn to ignore it.
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install \
	--quiet --constraint $(LOCK) --build-constraint $(LOCK)

# The venv with the lock's pip in it.
define NEW_VENV
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing Mnemo into $(VENV) (first run only)..."
	@$(BIN)/python -m pip install --quiet --constraint $(LOCK) pip
endef

$(VENV)/.installed-run: pyproject.toml setup.py $(LOCK)
	$(NEW_VENV)
	@$(PIP_INSTALL) -e .
	@touch $@

# Everything `run` has and the tools, in one pip run (a fresh clone's `make test` and CI):
# so it stands for the run stamp too.
$(VENV)/.installed-test: pyproject.toml setup.py $(LOCK)
	$(NEW_VENV)
	@$(PIP_INSTALL) -e '.[dev,bench]'
	@touch $(VENV)/.installed-run $@

$(VENV)/.installed-bench: $(VENV)/.installed-run
	@$(PIP_INSTALL) -e '.[bench]'
	@touch $@

# Refresh the lock: the newest versions pyproject.toml's ranges allow (and the newest pip, which
# the lock then pins for every install), resolved in a fresh venv with every extra, frozen. Run
# `make test` with the result before committing it.
LOCK_VENV := $(VENV)-lock
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install --quiet '.[dev,bench]'
	{ echo "# The versions Mnemo is tested with, for pip --constraint. Made by \`make lock\`"; \
	  echo "# (a fresh venv, pip install '.[dev,bench]', pip freeze) with $$($(LOCK_VENV)/bin/python --version)."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude mnemo-bot; } > $(LOCK)
	rm -rf $(LOCK_VENV) build

run: $(STAMP_RUN)
	@$(BIN)/mnemo run

chat: $(STAMP_RUN)
	@$(BIN)/mnemo chat

doctor: $(STAMP_RUN)
	@$(BIN)/mnemo doctor

# Two pytest workers per core (pytest-xdist), at most 8 (each holds the ONNX model, about half
# a GB), each test file kept on one worker so its module's fixtures (a wheel, a wheelhouse) are
# built once; TEST_WORKERS=0 runs in this process. Much of a worker's time is spent waiting on
# the subprocesses and servers it started: on the 2-core machine the suite took 568 s with 2
# workers, 438 s with 3, 393 s with 4 (docs/testing.md). Files go out in collection order,
# which tests/conftest.py sorts longest first.
TEST_WORKERS ?= $(shell n=$$(($$(nproc) * 2)); echo $$((n > 8 ? 8 : n)))
test: $(STAMP_TEST)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# CI runs this before the tests. mypy reads what to check and how strictly from pyproject.toml;
# its cache lives in the venv (reset with it) and makes a re-run take seconds.
lint: $(STAMP_TEST)
	$(BIN)/ruff check bot benchmarks plugins tests
	$(BIN)/ruff format --check bot benchmarks plugins tests
	$(BIN)/mypy --cache-dir $(VENV)/mypy-cache

format: $(STAMP_TEST)
	$(BIN)/ruff check --fix bot benchmarks plugins tests
	$(BIN)/ruff format bot benchmarks plugins tests

# The bot's own words in other languages (bot/i18n, docs/languages.md): the texts marked in
# bot/ extracted into the template, each language's catalog brought up to date from it (a
# changed English text loses its translation: it is shown in English until translated again),
# and every catalog compiled for gettext. `make messages NEW_LANGUAGE=fr` starts a language.
CATALOGS := bot/i18n/locales
NEW_LANGUAGE ?=
messages: $(STAMP_RUN)
	$(BIN)/pybabel extract --no-wrap --sort-output --add-location=file \
		--add-comments=TRANSLATORS: --project=Mnemo --copyright-holder="Mnemo's authors" \
		--output-file=$(CATALOGS)/mnemo.pot bot
	@if [ -n "$(NEW_LANGUAGE)" ]; then \
		$(BIN)/pybabel init --no-wrap --input-file=$(CATALOGS)/mnemo.pot \
			--output-dir=$(CATALOGS) --domain=mnemo --locale=$(NEW_LANGUAGE); fi
	$(BIN)/pybabel update --no-wrap --no-fuzzy-matching --ignore-obsolete \
		--input-file=$(CATALOGS)/mnemo.pot --output-dir=$(CATALOGS) --domain=mnemo
	$(BIN)/pybabel compile --statistics --directory=$(CATALOGS) --domain=mnemo

bench: $(STAMP_BENCH)
	$(BIN)/mnemo bench all --processes 1,2

# The memory bench against a small real model served on this machine (docs/live-model.md).
# Mnemo never downloads a model: give an already-built llama-cpp-python server's Python and a
# GGUF file. Every request and answer is recorded (RECORD, JSON lines).
LLAMA_PYTHON ?=
GGUF ?=
ONLY ?= family-move-job-car,likes-and-dislikes,retract-misspoke-library,group-injection
RECORD ?= bench-results/live/live-model.jsonl
# BENCH=cost runs `mnemo bench cost --live` instead (reply latency), with BENCH_ARGS.
BENCH ?= memory
BENCH_ARGS ?=
bench-live: $(STAMP_BENCH)
	@test -n "$(LLAMA_PYTHON)" && test -n "$(GGUF)" || { \
		echo "make bench-live LLAMA_PYTHON=<llama-cpp-python env>/bin/python GGUF=<model.gguf>"; \
		echo "(see docs/live-model.md)"; exit 2; }
	nice -n 5 $(BIN)/python -m benchmarks.live_model --llama-python "$(LLAMA_PYTHON)" \
		--gguf "$(GGUF)" --only "$(ONLY)" --record "$(RECORD)" --out bench-results/live \
		--bench "$(BENCH)" --bench-args "$(BENCH_ARGS)"

clean:
	rm -rf $(VENV) $(LOCK_VENV) .pytest_cache .ruff_cache .mypy_cache
