# hgxkit developer entry points. `make demo` and `make test` are the two commands most people need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Bytecode kept, whatever the calling shell says: with PYTHONDONTWRITEBYTECODE every test process compiles again
# each module it imports (pytest's rewriting of the unit tests alone is ~9 s of CPU per process, a fifth of `make
# check`'s four workers). Kept under build/pycache, never beside the sources: the simulated nodes' packages and
# images are built from folders of hgxkit/sim/data that tests import programs from. The tests that are about
# bytecode set their own environment.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/build/pycache
# The demo node's cluster (`hgxkit sim down --cluster $(HGXKIT_SIM_CLUSTER)` removes it).
HGXKIT_SIM_CLUSTER ?= demo

.PHONY: host host-test venv lock demo test test-stressed unit check e2e lint map bench faults soak soak-parts soak-part soak-figures soak-killed sweep mutation corpus clean

## host: this machine's packages, dockerd and lxcfs for the simulated nodes (stdlib only: runs before .venv);
## a no-op when all is there. As root on Debian/Ubuntu it installs and starts what is missing; elsewhere it
## prints one line with the command to run.
host:
	@$(PYTHON) -m hgxkit.sim.host setup --for demo

host-test:
	@$(PYTHON) -m hgxkit.sim.host setup --for test

## venv: hgxkit with the sim and test extras, every package at its pin in requirements/test.txt; remade when
## pyproject.toml or the pins change. The demo needs the sim extra alone (SIM_STAMP), a third less to install.
## Installed by uv (put in the venv by its pip), which fetches and unpacks the wheels in parallel: 10 s for the
## sim extra on a fresh machine, where pip took 45 s that a first `make demo` waits for.
PINS := requirements/test.txt
SIM_STAMP := $(VENV)/.installed-sim
UV := $(BIN)/uv pip install --quiet --python $(BIN)/python -c $(PINS)

venv: $(STAMP)

$(SIM_STAMP): pyproject.toml $(PINS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==0.9.9
	$(UV) -e '.[sim]'
	touch $(SIM_STAMP)

$(STAMP): $(SIM_STAMP)
	$(UV) -e '.[sim,test]'
	touch $(STAMP)

## lock: renew requirements/test.txt and requirements/controller.txt from the package index (fresh venvs under
## build/lock; requirements/lock.sh says what each pins)
lock:
	PYTHON=$(PYTHON) requirements/lock.sh

## demo: one simulated 8xH200 node -> the forum post's setup served, benchmarked, compared with the post.
## SGLang's benchmark client (the standard library installs it) starts while the venv is made; the demo waits
## for it side by side with the image build.
demo: host
	@mkdir -p build
	@$(PYTHON) -m hgxkit.sim.standin.client_store sglang >build/demo-client-store.log 2>&1 & store=$$!; \
	$(MAKE) --no-print-directory $(SIM_STAMP) && $(BIN)/hgxkit sim demo --cluster $(HGXKIT_SIM_CLUSTER); rc=$$?; \
	wait $$store || { echo "demo: the client store's install failed: build/demo-client-store.log"; tail -3 build/demo-client-store.log; }; \
	exit $$rc

## test: lint and format check, then every test (unit and end-to-end); what .ci/run runs
## The real benchmark clients' store (installed once per host, a no-op when up to date; without root it only
## warns, and the tests that need it skip, or fail under CI=true).
CLIENT_STORE ?= $(or $(HGXKIT_SIM_CLIENT_STORE),/var/lib/hgxkit/sglang-client)
export HGXKIT_SGLANG_CLIENT_VENV ?= $(CLIENT_STORE)

test: host-test venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	-$(BIN)/hgxkit sim client install
	PYTHON=$(BIN)/python tests/run_all.sh

unit: venv
	$(BIN)/python -m pytest tests/unit

## check: the inner loop in under 3 minutes: lint, the source rules and the unit tests in 4 workers side by side
## (most of their time is spent waiting on subprocesses and sockets); the packaging tests (`-m install`, a wheel
## into a fresh venv), the regeneration of the engines' option tables from their packages (`-m pins`, which
## changes only with the pins) and the tests that run the engines' real clients from the client store (`-m client`:
## each imports torch, about 8 CPU s) are left to `make test`
check: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/long_functions.py
	$(BIN)/python tools/modmap.py --check
	$(BIN)/python -m pytest -q -n 4 -m "not install and not pins and not client" tests/unit

## test-stressed: `make test`'s suite with the host under the soak's CPU and I/O stress (STRESS, below): no test may
## need a quiet machine. Ends with one line: the suite's result, its time, the stress and the load averages seen.
test-stressed: host-test venv
	@command -v stress-ng >/dev/null || { echo "test-stressed: stress-ng missing: apt-get install stress-ng"; exit 1; }
	-$(BIN)/hgxkit sim client install
	stress-ng $(STRESS) --timeout 4h >/dev/null 2>&1 & s=$$!; start=$$(date +%s); \
	PYTHON=$(BIN)/python tests/run_all.sh; rc=$$?; load=$$(cut -d' ' -f1-3 /proc/loadavg); kill $$s; \
	echo "test-stressed: exit $$rc in $$(( $$(date +%s) - start )) s under stress-ng $(STRESS) on $$(nproc) CPUs; load average (1, 5, 15 min) at the end: $$load"; \
	exit $$rc

## bench: the end-to-end checks too slow for `make test` (a 1 GB image pulled through a shaped link, ~4 min: CI pulls 0.3 GB; a
## published two-node Slurm script served by hgxkit, then its export run by a real Slurm on two nodes, ~6 min)
bench: venv host-test
	HGXKIT_BENCH=1 $(BIN)/python -m pytest tests/e2e/test_pull_progress.py tests/e2e/test_slurm.py

## faults: the whole fault matrix (docs/faults.md; HGXKIT_FAULTS=id,id picks cases; ~1-2 min a case)
HGXKIT_FAULTS ?= all
faults: venv host-test
	HGXKIT_FAULTS=$(HGXKIT_FAULTS) $(BIN)/python -m pytest tests/e2e/test_fault_matrix.py tests/e2e/test_fault_matrix_model.py -v

## soak: the whole fault matrix with the host under CPU and I/O stress (stress-ng from Debian; STRESS sets its
## load), in parts: each part one pytest session with its own cluster, under 10 minutes with the defaults
## (`make soak-part PART=k`, k from 1 to `make soak-parts`; without PART, the cases HGXKIT_FAULTS names); the figures of every part are added up in
## SOAK_FIGURES and printed in one line by `make soak-figures` (cases, faults injected, requests to the untouched
## groups, requests failed, the stress and the load average seen). `make soak` runs every part, then the line.
STRESS ?= --cpu 2 --cpu-load 60 --io 1
SOAK_FIGURES ?= build/soak-figures.jsonl
SOAK_PARTS = $$($(BIN)/python -c "import sys; sys.path.insert(0, 'tests/faults'); import fault_matrix as m; \
	print(*range(1, len(m.parts()) + 1))")
soak: venv host-test
	@rm -f $(SOAK_FIGURES); rc=0; for k in $(SOAK_PARTS); do \
	  $(MAKE) --no-print-directory soak-part PART=$$k || rc=1; done; \
	$(MAKE) --no-print-directory soak-figures || rc=1; exit $$rc

soak-parts:
	@echo $(SOAK_PARTS)

soak-part: venv host-test
	@command -v stress-ng >/dev/null || { echo "soak: stress-ng missing: apt-get install stress-ng"; exit 1; }
	@mkdir -p $(dir $(SOAK_FIGURES))
	stress-ng $(STRESS) --timeout 4h >/dev/null 2>&1 & s=$$!; \
	HGXKIT_FAULTS=$(if $(PART),part:$(PART),$(HGXKIT_FAULTS)) HGXKIT_FAULT_FIGURES=$(abspath $(SOAK_FIGURES)) $(BIN)/python -m pytest \
	  tests/e2e/test_fault_matrix.py tests/e2e/test_fault_matrix_model.py -v; rc=$$?; \
	kill $$s; exit $$rc

soak-figures:
	@$(BIN)/python tests/faults/soak_figures.py $(SOAK_FIGURES) --stress "$(STRESS)"

## soak-killed: killed-replace test ROUNDS times in a row under the same stress; prints the count
ROUNDS ?= 20
soak-killed: venv host-test
	@command -v stress-ng >/dev/null || { echo "soak-killed: stress-ng missing: apt-get install stress-ng"; exit 1; }
	stress-ng $(STRESS) --timeout 4h >/dev/null 2>&1 & s=$$!; \
	HGXKIT_KILLED_REPLACE_ROUNDS=$(ROUNDS) $(BIN)/python -m pytest \
	  "tests/e2e/test_serving.py::test_a_killed_replace_finishes_and_a_second_run_is_refused"; rc=$$?; \
	kill $$s; exit $$rc

## sweep: every corpus post that imports, started on two simulated nodes with the stand-in image (~10 min)
sweep: venv host-test
	$(BIN)/python bench/deploy_sweep.py

## mutation: mutation testing (mutmut) of the modules that carry promises, each against its own unit test files;
## prints a score per module and exits 1 on a mutant neither killed nor explained in tests/mutation/equivalent.txt.
## Each mutant runs under a memory limit (MUTATION_MEMORY_MB of address space per process) and a time limit
## (from its tests' own duration): a runaway one counts as killed. The whole run takes hours; CI runs a tenth of
## the fast modules' mutants (tests/mutation/test_sample.py; `tools/mutation.py --sample DIGIT`).
## `make mutation MODULES="secrets hostcmd"` runs some; `$(BIN)/python tools/mutation.py --list` names them all.
MODULES ?=
MUTATION_MEMORY_MB ?= 4096
mutation: venv
	nice -n 10 $(BIN)/python tools/mutation.py --memory-mb $(MUTATION_MEMORY_MB) $(MODULES)

## corpus: every lost continuation backslash of the posts' corpus and its formats/ must refuse or change nothing,
## each of its ~5,000 sites (minutes of CPU); `make check` and CI check the tenth that this commit's hash picks
corpus: venv
	HGXKIT_WHOLE_CORPUS=1 $(BIN)/python -m pytest -q -n 2 tests/unit/importing/test_import_ledger.py tests/unit/importing/test_corpus_ledger.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## map: rewrite docs/layout.md's map of the code from the modules' docstrings (tests/unit/project/test_readme_map.py checks it)
map:
	$(PYTHON) tools/modmap.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
