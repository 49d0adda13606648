# Two commands do everything on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[cli,server,mcp,vectors]'
	touch $@

$(TEST_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	bash scripts/install-test-deps.sh
	touch $@ $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m contextwright.demo

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy

test: $(TEST_STAMP) lint
	$(BIN)/pytest -q -p no:cacheprovider

bench: $(TEST_STAMP)
	$(BIN)/python bench/assemble.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build
