# Every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local]'
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,dev]'
	touch $@

demo: $(VENV)/.local
	$(BIN)/jobkit demo

test: $(VENV)/.dev
	$(BIN)/pytest

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV)
