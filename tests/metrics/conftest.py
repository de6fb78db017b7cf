"""Make `metrics_helpers` importable under pytest's importlib import mode."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def module_client(tmp_path_factory, storage_state):
    """One app over one database for a whole test module (data written once, queried many
    times); returns a function `(rows) -> client` that pushes the rows on first use."""
    from metrics_helpers import PLAIN, push
    from tests.conftest import matrix_client

    opened = []

    def factory(rows, extra=None):
        # through tests/conftest.py's make_config, so the storage state's settings apply
        client = matrix_client(tmp_path_factory.mktemp("metrics") / "data",
                               extra or PLAIN, storage_state)
        client.__enter__()
        opened.append(client)
        if rows:
            push(client, rows)
        return client

    yield factory
    for c in opened:
        c.__exit__(None, None, None)
