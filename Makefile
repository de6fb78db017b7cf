# logstore: `make run` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test install dist proto bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/logstore serve

# one run: the read tests run once per storage state they are in (head, sealed, split; the
# storage matrix of tests/conftest.py and tests/storage_matrix.py)
test: $(STAMP)
	$(BIN)/python -m pytest

# one file that runs the service: python dist/logstore.pyz serve
dist: $(STAMP)
	rm -rf build/pyz && mkdir -p dist
	$(BIN)/python -m pip install -q --target build/pyz --no-compile .
	$(BIN)/shiv --site-packages build/pyz --compressed -p '/usr/bin/env python3' \
	    -e app:main -o dist/logstore.pyz --reproducible
	@echo "built dist/logstore.pyz"

# regenerate the protobuf classes from proto/push.proto (the test suite checks they match)
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=proto proto/push.proto proto/remote.proto

bench: $(STAMP)
	$(BIN)/python bench/ingest.py

clean:
	rm -rf $(VENV) build dist *.egg-info
