# The two commands: `make run` (set up, then serve the memory on the embedded SQLite default)
# and `make test` (set up, then lint, type-check and run the tests).
VENV ?= .venv
ARGS ?=
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
AFI := $(VENV)/bin/afi
SYSTEM_PACKAGES := fuse3 libfuse3-dev pkg-config openssh-client ripgrep sshfs chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test setup system-deps lint typecheck demo bench clean

run: setup  ## make run ARGS="--port 9000 --ssh": ARGS go to afi serve
	$(AFI) serve $(ARGS)

test: setup lint typecheck
	$(VENV)/bin/pytest

setup: system-deps $(VENV)/.installed

system-deps:
	@dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || { \
		echo "installing system packages: $(SYSTEM_PACKAGES)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(SYSTEM_PACKAGES); }
	@# Node.js runs MCP Inspector (npx) in the tests; any Node.js that ships npx will do.
	@command -v npx >/dev/null 2>&1 || { \
		echo "installing Node.js for npx"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nodejs npm; }

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
