# The two commands a newcomer needs: `make run` (the whole product on embedded defaults) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements/base.txt requirements/dev.txt | sha1sum | cut -c1-12)
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/serenity
# The suite runs in this many processes (pytest-xdist), each with its own database, local SQS and ports; then
# the tests marked `solo` (the soak's whole stack under faults, a deadline a loaded machine would move) run alone.
# `make test TEST_PROCESSES=0` runs everything in make's own pytest process.
TEST_PROCESSES ?= 3

.PHONY: run test bench soak lint install clean

$(STAMP): requirements/base.txt requirements/dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements/dev.txt
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python scripts/run_local.py

# The whole lint set, and the first step of `make test`: the two cannot check different things. The migration check
# has PostgreSQL write each migration's SQL (it reads no table: tests/lint_settings.py), so it needs the server
# `make test` uses.
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python scripts/check_test_db.py
	DATABASE_URL=$(TEST_DATABASE_URL) DJANGO_SETTINGS_MODULE=tests.lint_settings LOG_LEVEL=WARNING \
		$(BIN)/python manage.py lintmigrations

test: lint
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/python scripts/check_test_db.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest --create-db -n $(TEST_PROCESSES) -m "not solo" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest --create-db -n 0 -m solo $(PYTEST_ARGS) || [ $$? -eq 5 ]

# Not part of `make test`: brings up the API, simulators, local SQS and a worker on PostgreSQL and measures them.
# `make bench SCENARIOS="scale fairness"` runs only those (poll create activate worker scale fairness wait budgets semrush scaleout); sized for the machine (scripts/bench/fit.py).
bench: $(STAMP)
	$(BIN)/python -m scripts.bench $(SCENARIOS)

# Not part of `make test`: SOAK_JOBS generations under SOAK_MINUTES of overlapping faults, then the invariants
# (docs/soak.md). SOAK_SEED, SOAK_JOBS, SOAK_MINUTES, SOAK_FAULT_EVERY, SOAK_DATABASE_URL, SOAK_FIRST_PORT.
soak: $(STAMP)
	$(BIN)/python -m scripts.soak

clean:
	rm -rf $(VENV) var
