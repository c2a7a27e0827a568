# The two commands a newcomer needs: `make run` (the whole product on embedded defaults) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements/base.txt requirements/dev.txt | sha1sum | cut -c1-12)
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/serenity

.PHONY: run test bench lint install clean

$(STAMP): requirements/base.txt requirements/dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements/dev.txt
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python scripts/run_local.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python scripts/check_test_db.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest --create-db $(PYTEST_ARGS)

# Not part of `make test`: brings up the API, simulators, local SQS and a worker on PostgreSQL and measures them.
# `make bench SCENARIOS="scale fairness"` runs only those (poll create activate worker scale fairness).
bench: $(STAMP)
	$(BIN)/python scripts/bench.py $(SCENARIOS)

clean:
	rm -rf $(VENV) var
