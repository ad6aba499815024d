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
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## demo: import the forum post's command into a recipe, check it, render it for 8 GPUs and diff the two backends
demo: venv
	$(BIN)/hgxkit recipe check recipes/deepseek-v4-flash-dspark-marlin.yaml --gpus 8
	$(BIN)/hgxkit recipe render recipes/deepseek-v4-flash-dspark-marlin.yaml --gpus 8
	$(BIN)/hgxkit recipe diff recipes/deepseek-v4-flash-dspark-marlin.yaml recipes/deepseek-v4-flash-dspark-flashinfer.yaml

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
