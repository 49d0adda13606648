# Two commands do everything on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
PURE_TESTS := tests/test_properties.py tests/test_assemble.py tests/test_packing.py \
	tests/test_scoring.py tests/test_render.py tests/test_tokens.py tests/test_records.py \
	tests/test_hot_path.py tests/test_compiled.py

.PHONY: demo test lint compile bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[cli]'
	touch $@

$(TEST_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	bash scripts/install-test-deps.sh
	touch $@ $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m contextwright.demo

# The mypyc build of the hot path (docs/compiled.md); does nothing when it is current.
compile: $(TEST_STAMP)
	$(BIN)/python scripts/compile.py

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy

# The whole suite on the compiled build, then the core of it from source (CONTEXTWRIGHT_PURE).
test: $(TEST_STAMP) lint compile
	$(BIN)/pytest -q -p no:cacheprovider
	CONTEXTWRIGHT_PURE=1 $(BIN)/pytest -q -p no:cacheprovider $(PURE_TESTS)

bench: $(TEST_STAMP) compile
	$(BIN)/python bench/assemble.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/contextwright/_compiled
