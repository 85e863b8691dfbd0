# Both README commands create .venv and install everything they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# pytest-xdist workers of `make test` and `make test-fast` (docs/contributing.md);
# PYTEST_WORKERS=0: one process (a failure's output then comes in order); three on
# this 2-core machine: the workers wait on crawls and servers a third of the time
# (docs/contributing.md: 8 min 6 s against 10 min 1 s with two, the same tree)
PYTEST_WORKERS ?= 3
# loadgroup: a module marked xdist_group (its module-scoped crawl) stays on one worker
PYTEST_XDIST := -n $(PYTEST_WORKERS) --dist loadgroup

.PHONY: demo test test-fast test-example lint format docs bench clean package-check

$(STAMP): setup.cfg pyproject.toml setup.py $(wildcard scrapy_recrawl/*/*.pyx) examples/plugin/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,docs,ml,planning,plot]'
	# the example plug-in package (docs/plugins.md), installed as a user would
	$(BIN)/python -m pip install --quiet -e examples/plugin
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m example_project.demo

test: $(STAMP) lint docs
	$(BIN)/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)
	$(MAKE) test-example

# the loop while working (docs/contributing.md): no lint, no docs build, no `slow` test
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -q $(PYTEST_XDIST) $(PYTEST_ARGS)
	$(MAKE) test-example

# the example plug-in package's own tests, run from its directory as its author would
# (its pyproject.toml's pytest settings; scrapy_recrawl.testing's fixtures): seconds
test-example: $(STAMP)
	cd examples/plugin && $(abspath $(BIN))/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check scrapy_recrawl tests bench example_project examples
	$(BIN)/ruff format --check scrapy_recrawl tests bench example_project examples
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format scrapy_recrawl tests bench example_project examples
	$(BIN)/ruff check --fix scrapy_recrawl tests bench example_project examples

# the sdist and wheel a release would upload; the sdist installed in a fresh venv crawls
package-check: $(STAMP)
	bash .ci/package_check.sh

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
