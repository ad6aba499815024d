# hgxkit developer entry points. `make demo` and `make test` are the two commands most people need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The demo node's cluster (`hgxkit sim down --cluster $(HGXKIT_SIM_CLUSTER)` removes it).
HGXKIT_SIM_CLUSTER ?= demo

.PHONY: host host-test venv demo test unit e2e lint map bench clean

## host: this machine's packages, dockerd and lxcfs for the simulated nodes (stdlib only: runs before .venv);
## a no-op when all is there. As root on Debian/Ubuntu it installs and starts what is missing; elsewhere it
## prints one line with the command to run.
host:
	@$(PYTHON) -m hgxkit.sim.host setup --for demo

host-test:
	@$(PYTHON) -m hgxkit.sim.host setup --for test

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[sim,test]'
	touch $(STAMP)

## demo: one simulated 8xH200 node -> the forum post's setup served, benchmarked, compared with the post
demo: host venv
	$(BIN)/hgxkit sim demo --cluster $(HGXKIT_SIM_CLUSTER)

## test: lint, then every test (unit and end-to-end); what .ci/run runs
## The real benchmark clients' store (installed once per host, a no-op when up to date; without root it only
## warns, and the tests that need it skip, or fail under CI=true).
CLIENT_STORE ?= $(or $(HGXKIT_SIM_CLIENT_STORE),/var/lib/hgxkit/sglang-client)
export HGXKIT_SGLANG_CLIENT_VENV ?= $(CLIENT_STORE)

test: host-test venv
	$(BIN)/ruff check .
	-$(BIN)/hgxkit sim client install
	PYTHON=$(BIN)/python tests/run_all.sh

unit: venv
	$(BIN)/python -m pytest tests/unit

## bench: the end-to-end checks too slow for `make test` (a 1 GB image pulled through a shaped link, ~4 min)
bench: venv host-test
	HGXKIT_BENCH=1 $(BIN)/python -m pytest tests/e2e/test_pull_progress.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check . || true

## map: rewrite README.md's map of the code from the modules' docstrings (tests/unit/test_readme_map.py checks it)
map:
	$(PYTHON) tools/modmap.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
