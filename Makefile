# Everything a fresh machine needs is installed from this file and pyproject.toml.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench docs clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/clankie demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: $(STAMP) lint
	$(VENV)/bin/python -m pytest

bench: $(STAMP)
	$(VENV)/bin/python bench/accept.py
	$(VENV)/bin/python bench/workspace.py

docs: $(STAMP)
	$(VENV)/bin/python -c 'from clankie.core.diagram import render; open("docs/lifecycle.md", "w").write(render())'

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
