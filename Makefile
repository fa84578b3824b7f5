# One command each: run, test, lint, typecheck, fix, bench, docs. CI calls the same ones.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install run test lint typecheck fix bench bench-console bench-routing bench-search docs docs-build

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# make run HOST=0.0.0.0 PORT=9000 SIMULATOR_PORT=9100 to move it.
HOST ?= 127.0.0.1
PORT ?= 8000
SIMULATOR_PORT ?= 8100

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py run_embedded --host $(HOST) --port $(PORT) --simulator-port $(SIMULATOR_PORT)

# Three workers, each a whole test file at a time (module fixtures start
# their servers once). A third worker on two cores runs while the others
# wait on their servers. PYTEST_ARGS="-n 0" runs in one process.
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: the suite
# starts a hundred Python processes, and pytest rewrites every test file's
# asserts again in each worker unless it may keep the result.
test: install
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n 3 --dist loadfile $(PYTEST_ARGS)

# ruff, then the import rules between the apps and between the parts of
# responses_api (scripts/check_imports.py), the size limits
# (scripts/check_sizes.py), and the settings reference written from
# config/declared/ (scripts/settings_reference.py without --check rewrites it).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/check_imports.py
	$(PY) scripts/check_sizes.py
	$(PY) scripts/settings_reference.py --check

# mypy with django-stubs over the product code ([tool.mypy] in pyproject.toml).
# Run without DATABASE_URL/REDIS_URL: the plugin loads the embedded settings.
typecheck: install
	env -u DATABASE_URL -u REDIS_URL $(PY) -m mypy

# The benchmark (bench/README.md): BENCH_ARGS=--quick for a smoke run,
# --with-litellm for a LiteLLM column. Honours DATABASE_URL/REDIS_URL.
bench: install
	$(PY) bench/run.py $(BENCH_ARGS)

# The console at scale (bench/README.md, "Console at scale"): seeds usage rows
# into PostgreSQL (BENCH_DATABASE_URL, default database sy_usage_bench on
# 127.0.0.1) and times the pages. BENCH_ARGS="--rows 10000000" for 10 M rows.
bench-console: install
	$(PY) bench/console.py $(BENCH_ARGS)

# Routing policies against two llama-server replicas (bench/README.md,
# "Routing"): BENCH_ARGS=--write puts the table into bench/README.md.
bench-routing: install
	env -u REDIS_URL $(PY) bench/routing.py $(BENCH_ARGS)

# Vector store ingestion and search at 1,000 and 100,000 chunks (bench/README.md,
# "Vector store search"); BENCH_ARGS=--million adds 1,000,000. Honours DATABASE_URL.
bench-search: install
	$(PY) bench/search.py $(BENCH_ARGS)

# The documentation site (mkdocs.yml, docs/): served at http://127.0.0.1:8001
# while you edit it; docs-build builds it as CI does, --strict (a broken link
# or a page missing from the navigation fails), into a directory that is
# then removed.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

docs-build: install
	site=$$(mktemp -d) && trap 'rm -rf "$$site"' EXIT && \
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir "$$site"

fix: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
