# Siteward: `make run` sets everything up and starts it; `make serve` serves it for real
# (gunicorn + WhiteNoise + the worker cluster, DEBUG refused; see docs/deploy.md);
# `make test` runs the whole suite, `make test-fast` all of it but the browser tests and
# those that start a real qcluster.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# HOST= / PORT= on make's command line, else the SITEWARD_HOST / SITEWARD_PORT the manage.py
# commands read. HOST and PORT in the environment are not ours (tcsh exports HOST, the machine's name).
HOST := $(if $(filter command line,$(origin HOST)),$(HOST),$(or $(SITEWARD_HOST),127.0.0.1))
PORT := $(if $(filter command line,$(origin PORT)),$(PORT),$(or $(SITEWARD_PORT),8000))

.PHONY: run serve test test-fast install install-dev migrate lint

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
		{ echo "Siteward needs Python 3.11 or newer (set PYTHON=python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# manage.py generates a secret key once per checkout in var/secret_key (git-ignored)
# when SECRET_KEY is not set, so nothing here needs to handle one.
migrate: install
	$(BIN)/python manage.py migrate --noinput

run: migrate
	$(BIN)/python manage.py runall --host $(HOST) --port $(PORT)

# collectstatic, then gunicorn on config.wsgi and the worker cluster; Ctrl-C stops both.
serve: migrate
	$(BIN)/python manage.py serve --host $(HOST) --port $(PORT)

# Three workers on two cores: the cluster, browser and server tests spend most of
# their time waiting on other processes, and two workers left both cores half idle;
# four ran the timing-bound tests too close to their margins.
TEST_WORKERS ?= 3

test: install-dev
	@command -v chromium >/dev/null 2>&1 || ./.ci/ensure-chromium
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

test-fast: install-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not browser and not cluster" $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .
