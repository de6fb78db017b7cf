"""Make `metrics_helpers` importable under pytest's importlib import mode."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def module_client(tmp_path_factory):
    """One app over one database for a whole test module (data written once, queried many
    times); returns a function `(rows) -> client` that pushes the rows on first use."""
    import config as config_module
    from app import create_app
    from litestar.testing import TestClient
    from metrics_helpers import PLAIN, push

    opened = []

    def factory(rows, extra=None):
        data = {"common": {"path_prefix": str(tmp_path_factory.mktemp("metrics"))}}
        for section, values in (extra or PLAIN).items():
            data.setdefault(section, {}).update(values)
        client = TestClient(create_app(config_module.config_from_dict(data)))
        client.__enter__()
        opened.append(client)
        if rows:
            push(client, rows)
        return client

    yield factory
    for c in opened:
        c.__exit__(None, None, None)
