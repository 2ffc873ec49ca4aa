# The two commands: `make run` (set up, then serve the memory on the embedded SQLite default)
# and `make test` (set up, then lint, type-check and run every test). `make check` is the fast lane:
# lint, types and the tests that start no process (docs/testing.md).
VENV ?= .venv
ARGS ?=
# pytest workers (pytest-xdist): one per core by default; JOBS=0 runs in this process, one test at a time.
JOBS ?= auto
# more pytest options, e.g. make test PYTEST_ARGS=--record-durations (tests/support/durations.py)
PYTEST_ARGS ?=
PY := $(VENV)/bin/python
# setuptools notes "Editable installation" on every editable install not laid out as src/ (ours maps
# providers/ and bindings/ into afi.*, so it imports through a finder): information, not a problem, muted.
PIP := PYTHONWARNINGS="ignore:Editable installation" $(VENV)/bin/pip
AFI := $(VENV)/bin/afi
SYSTEM_PACKAGES := fuse3 libfuse3-dev pkg-config openssh-client ripgrep sshfs chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# MCP Inspector 2.12, which the tests run, needs Node.js 22.19 or later: when the system's is older,
# the npm registry's node-linux-<arch> package (the official binary) goes into .venv/bin/node.
NODE_PIN := 22.23.5
NODE_RECENT := const [a, b] = process.versions.node.split('.').map(Number); process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)

.PHONY: run test check setup system-deps node lint typecheck demo bench clean

run: setup  ## make run ARGS="--port 9000 --ssh": ARGS go to afi serve
	$(AFI) serve $(ARGS)

test: setup node lint typecheck  ## every test; files stay whole on one worker (module servers start once)
	$(VENV)/bin/pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

check: setup lint typecheck  ## the fast lane: the tests that start no process (no CLI, server, PostgreSQL, browser)
	$(VENV)/bin/pytest -n $(JOBS) -m "not process" -q $(PYTEST_ARGS)

setup: system-deps $(VENV)/.installed

system-deps:
	@dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || { \
		echo "installing system packages: $(SYSTEM_PACKAGES)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(SYSTEM_PACKAGES); }
	@# Node.js runs MCP Inspector (npx) in the tests: npm and npx from the system, node 22.19+ (see node).
	@command -v npx >/dev/null 2>&1 || { \
		echo "installing Node.js for npx"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nodejs npm; }

node: setup  ## .venv/bin/node: Node.js 22.19 or later for the tests (the system's when it is recent enough)
	@if $(VENV)/bin/node -e "$(NODE_RECENT)" 2>/dev/null; then :; \
	elif node -e "$(NODE_RECENT)" 2>/dev/null; then \
		ln -sf "$$(command -v node)" $(VENV)/bin/node; \
	else \
		arch=$$(uname -m | sed 's/x86_64/x64/; s/aarch64/arm64/'); \
		echo "installing Node.js $(NODE_PIN) (node-linux-$$arch from the npm registry) into $(VENV)/node"; \
		npm install --silent --prefix $(VENV)/node --no-audit --no-fund "node-linux-$$arch@$(NODE_PIN)" && \
		ln -sf ../node/node_modules/node-linux-$$arch/bin/node $(VENV)/bin/node; \
	fi

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $@

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy

demo: setup
	$(PY) examples/memory_fabric.py

bench: setup  ## every benchmark, then each drawn beside its baseline (bench/results/<name>.png)
	$(PIP) install -q -e '.[dev,bench]'
	$(PY) -m bench all
	$(PY) -m bench._plots

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
