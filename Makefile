# hgxkit developer entry points. `make demo` and `make test` are the two commands most people need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv demo test unit e2e lint bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[sim,test]'
	touch $(STAMP)

## demo: one simulated 8xH200 node -> the forum post's setup served, benchmarked and archived
demo: venv
	$(BIN)/hgxkit sim client install  # SGLang's real benchmark client, once per host (~4 min; then skipped)
	$(BIN)/hgxkit sim up --nodes 1 --memory-gib 3072 --cluster demo
	HGXKIT_SIM_CLUSTER=demo PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pyinfra -y inventories/sim.py deploys/dspark.py
	@echo
	@$(BIN)/hgxkit results ls
	@echo
	@echo "Results are archived under ./results/<host>/<UTC time>_<recipe>/ (SIMULATED: no real GPU was used)."
	@echo "  $(BIN)/hgxkit results show RUN_ID                  # one run (RUN_ID from the list above)"
	@echo "  $(BIN)/hgxkit results compare RUN_ID --reference   # against the post's numbers"
	@echo "  $(BIN)/hgxkit sim down --cluster demo              # remove the simulated node"

## test: lint, then every test (unit and end-to-end); what .ci/run runs
test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

unit: venv
	$(BIN)/python -m pytest tests/unit

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check . || true

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
