# Two commands for a new machine (see README.md):
#   make demo   run the sample TrainJob on the local cluster until Complete
#   make test   lint, type-check, unit tests and the end-to-end suite on the local cluster
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint unit e2e venv binaries crds

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

binaries:
	bash e2e/build.sh

crds: venv
	$(PY) -m api.crd

demo: venv binaries
	$(PY) -m e2e.demo

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy api trainer tests e2e

unit: venv
	$(PY) -m pytest tests -q

e2e: venv binaries
	$(PY) -m pytest e2e -v

test: venv binaries lint
	$(PY) -m pytest tests e2e -v -p no:cacheprovider
