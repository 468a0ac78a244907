# Eco-challenge chatbot gateway. `make help` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: help install install-vllm lint test run bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

$(PY):
	python3 -m venv $(VENV)

install: $(PY) ## install the gateway and its test tools into .venv
	scripts/venv_install.sh $(VENV) --quiet -e '.[test,langchain]'

install-vllm: ## install vLLM (CPU build without a GPU) into its own cached venv
	scripts/install_vllm.sh

lint: install ## ruff (lint + format check) and mypy --strict on app/
	$(VENV)/bin/ruff check app tests bench scripts
	$(VENV)/bin/ruff format --check app tests bench scripts
	$(VENV)/bin/mypy

test: ## install everything the tests need, lint, and run the whole suite (README command 2)
	scripts/test.sh

run: ## start vLLM (unless LLM_BASE_URL is set) and the gateway (README command 1)
	scripts/run.sh

ECO_CACHE_DIR ?= $(HOME)/.cache/eco-gateway
SOAK_MINUTES ?= 3

bench: install ## run every benchmark under bench/ (about 55 min; bench/README.md)
	scripts/venv_install.sh $(VENV) --quiet -e '.[test,bench]'
	scripts/install_litellm.sh
	scripts/install_vllm.sh
	$(PY) bench/scrubber_bench.py
	$(PY) bench/disconnect_bench.py --trials 1000
	$(PY) bench/retrieval_bench.py
	$(PY) bench/store_bench.py
	$(PY) bench/intent_eval.py --split both
	$(PY) bench/overhead_bench.py
	$(PY) bench/transport_bench.py
	$(PY) bench/burst_bench.py
	$(PY) bench/scaling_bench.py --compare-flags
	$(PY) bench/profile_gateway.py
	$(PY) bench/memory_bench.py
	$(PY) bench/overload_bench.py
	$(PY) bench/soak_bench.py --minutes $(SOAK_MINUTES)
	$(PY) bench/vllm_bench.py
	$(PY) bench/disconnect_bench.py --vllm --trials 500

clean: ## remove caches (keeps the venvs)
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis
