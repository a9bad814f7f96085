# Two commands matter (see README): `make run` and `make test`. Everything they need is
# installed here from requirements.lock, so a fresh machine gets the versions CI tested.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
UV_VERSION := $(shell sed -n 's/^uv==//p' requirements.lock)
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit notebooks docs docs-serve services lab bench mutate lock clean public-api

$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q "uv==$(UV_VERSION)"
	$(VENV)/bin/uv pip sync -q --python $(PY) requirements.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	touch $(STAMP)

## The main job: run every notebook against the embedded sandbox, write HTML under build/.
run: $(STAMP)
	$(VENV)/bin/gptools run-notebooks --out build

## The whole test suite: lint, types, pytest, nbval over notebooks/, the docs site (strict).
test: $(STAMP) services lint typecheck unit notebooks docs

services:
	@bash scripts/ensure-services
	@bash scripts/ensure-browser
	@bash scripts/ensure-promtool
	@bash scripts/ensure-nginx

lint: $(STAMP)
	$(VENV)/bin/ruff check gptools tests
	$(VENV)/bin/ruff format --check gptools tests

typecheck: $(STAMP)
	$(VENV)/bin/mypy

## The tests spread over the cores (pytest-xdist); every Spark test in one group, so one
## worker runs them all in one JVM. The 25 slowest are printed (docs/testing.md, "Suite time").
## PYTEST_WORKERS=0 runs them in this one process.
PYTEST_WORKERS ?= auto
DURATIONS := --durations=25
unit: $(STAMP)
	$(VENV)/bin/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadgroup $(DURATIONS) tests

## Each notebook's cells on one worker, in order, in one kernel (--dist loadfile).
notebooks: $(STAMP)
	@if ls notebooks/*.ipynb >/dev/null 2>&1; then \
	  $(VENV)/bin/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile $(DURATIONS) \
	    --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg notebooks; \
	else echo "no notebooks yet"; fi

## The documentation site into build/site, offline; --strict: every link and reference resolves.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

## Serve the documentation site at http://127.0.0.1:8000/, rebuilt on every change.
docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

## Open the notebooks in JupyterLab.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks

## Benchmarks (not part of `make test`): each prints a final RESULT line.
bench: $(STAMP)
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk) || echo "no wrk: benchmarks fall back to httpx"
	@for b in tests/benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

## Rewrite tests/public_api.txt after an intended change to the public surface (review its diff).
public-api: $(STAMP)
	$(PY) -m tests.public_surface --write

## Mutation testing (not part of `make test`; docs/testing.md): mutmut over the modules that
## hold the rules ([tool.mutmut] in pyproject.toml), then the score, failing under the floor.
## MUTANTS=GLOB checks only those, e.g. make mutate MUTANTS='gptools.webhooks._refusals*'.
MUTATION_FLOOR := 55
MUTANTS ?=
mutate: $(STAMP) services
	$(VENV)/bin/mutmut run --max-children 2 $(if $(MUTANTS),'$(MUTANTS)')
	$(PY) scripts/mutation-score $(MUTATION_FLOOR) '$(MUTANTS)'

## Re-resolve requirements.lock after changing pyproject.toml: the base, every extra and dev.
lock:
	$(VENV)/bin/uv pip compile -q pyproject.toml --extra all --extra dev -o requirements.lock --python-version 3.11

clean:
	rm -rf build $(VENV)
