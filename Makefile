# logstore: `make run` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# The CPython the pyz is built for: another one on this host builds for it, e.g.
# `make dist PYTHON_DIST=/usr/bin/python3.13` (the pyz holds compiled libraries for one
# CPython version and CPU architecture, so the file is named after both).
PYTHON_DIST ?= $(BIN)/python
PY_TAG   = import platform, sys; print("cp%d%d-%s" % (*sys.version_info[:2], platform.machine()))
DIST_TAG = $(shell $(PYTHON_DIST) -c '$(PY_TAG)' 2>/dev/null)
HOST_TAG = $(shell $(BIN)/python -c '$(PY_TAG)')
DIST_PY  = $(shell $(PYTHON_DIST) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null)

.PHONY: run test install dist proto bench clean

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	touch $@

# one stamp per set of extras: `make run` installs the runtime alone, `make test` adds the test
# extras, `make dist`/`make bench` the dev ones (shiv, drain3). Each install also compiles
# the C files (a push's loops, a block's Bloom filter) in place, so a changed .c reinstalls.
NATIVE := services/ingest/_linescan.c services/ingest/_pushproto.c storage/blocks/_bloom.c
$(VENV)/.installed-run: pyproject.toml $(NATIVE) $(VENV)/.created
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(NATIVE) $(VENV)/.created
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(NATIVE) $(VENV)/.created
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(BIN)/logstore serve

# one run: the read tests run once per storage state they are in (head, sealed, split; the
# storage matrix of tests/conftest.py and tests/storage_matrix.py)
# pytest workers (pytest-xdist), a module's tests on one worker so its shared server or
# browser starts once: the suite is Python work on one core per process, and took 14.5 min
# on the 2-core machine in one process, 8.7 min in two. Three since the suite starts real
# servers (logstore, PostgreSQL, Alertmanager, Chromium) and waits on them: two workers used
# 24 of the 30 CPU-minutes a 15-minute run on two cores offers. A clean `.ci/run` took 5 min
# 57 s on 2026-11-26's machine (installs included; that machine ran code about 2x faster)
TEST_WORKERS ?= 3
test: $(VENV)/.installed-test $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope

# one file that runs the service: python3.11 dist/logstore-cp311-x86_64.pyz serve. The wheels
# come from the target interpreter's own pip (a throwaway venv's if it has none), so they
# match its version and platform; dist/logstore.pyz is the build for the venv's Python.
dist: $(VENV)/.installed-dev
	@test -n "$(DIST_TAG)" || { echo "make dist: '$(PYTHON_DIST)' is no Python interpreter" >&2; \
	    exit 2; }
	rm -rf build/pyz-$(DIST_TAG) build/venv-$(DIST_TAG) && mkdir -p dist
	if $(PYTHON_DIST) -m pip --version >/dev/null 2>&1; then pip="$(PYTHON_DIST) -m pip"; \
	else $(PYTHON_DIST) -m venv build/venv-$(DIST_TAG) \
	    && pip="build/venv-$(DIST_TAG)/bin/python -m pip"; fi; \
	$$pip install -q --disable-pip-version-check --target build/pyz-$(DIST_TAG) --no-compile .
	$(BIN)/shiv --site-packages build/pyz-$(DIST_TAG) --compressed -p '/usr/bin/env $(DIST_PY)' \
	    --preamble deploy/pyz_preamble.py -e app:main -o dist/logstore-$(DIST_TAG).pyz --reproducible
	@if [ "$(DIST_TAG)" = "$(HOST_TAG)" ]; then cp dist/logstore-$(DIST_TAG).pyz dist/logstore.pyz; \
	    echo "built dist/logstore-$(DIST_TAG).pyz and dist/logstore.pyz"; \
	else echo "built dist/logstore-$(DIST_TAG).pyz"; fi

# regenerate the protobuf classes from proto/push.proto (the test suite checks they match)
proto: $(VENV)/.installed-test
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=proto proto/push.proto proto/remote.proto

bench: $(VENV)/.installed-test $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

clean:
	rm -rf $(VENV) build dist *.egg-info
