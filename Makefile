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

# then the tests that read logs again, with the sealer moving every line into small blocks
# while they push and query (tests/conftest.py, EAGER_SEALING): answers must not change
SEALED_TESTS := tests/query tests/metrics tests/logql tests/pipeline tests/tail tests/legacy \
	tests/multitenant tests/storage tests/otlp tests/test_loki_paths.py tests/test_metadata_api.py

test: $(STAMP)
	$(BIN)/python -m pytest
	LOGSTORE_TEST_SEALING=eager $(BIN)/python -m pytest $(SEALED_TESTS)

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
