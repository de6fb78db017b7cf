"""One real server with loghub lines and one headless Chromium for the web page's tests.

Chromium and chromedriver are in tests/conftest.py's NEEDS: missing, these tests skip
locally and fail the run under CI. A failing test leaves `failure.png` (what the browser
showed) and `browser.log` (its console) in its tmp dir."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import LogstoreServer, absent
from tests.ui.harness import grafana_objects, loghub_streams, push, start_chromium



@pytest.fixture(scope="module")
def ui_server(tmp_path_factory) -> Iterator[LogstoreServer]:
    """The server with the loghub lines of tests/ui/harness.py over the last ten minutes,
    and its folders, dashboards and Viewer."""
    server = LogstoreServer(tmp_path_factory.mktemp("ui") / "data",
                            {"grafana": {"admin_password": "admin"},
                             "pattern_ingester": {"enabled": True},
                             "ruler": {"evaluation_interval": "1s", "poll_interval": "1s"}}
                            ).start()
    try:
        push(server, loghub_streams(time.time_ns()))
        grafana_objects(server.url)
        yield server
    finally:
        server.stop()


TENANTS = {"team-a": "line of team A", "team-b": "line of team B"}


@pytest.fixture(scope="module")
def tenant_server(tmp_path_factory) -> Iterator[LogstoreServer]:
    """A multi-tenant server (`auth_enabled: true`): tenants team-a and team-b, each with
    five lines of its own in the same stream `{job="tenants"}`."""
    server = LogstoreServer(tmp_path_factory.mktemp("ui-tenants") / "data",
                            {"auth_enabled": True}).start()
    try:
        now = time.time_ns()
        for tenant, text in TENANTS.items():
            push(server, [({"job": "tenants"}, [[str(now - i * 10**9), f"{text} #{i}"]
                                                 for i in range(5)])], tenant=tenant)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        absent("chromium and chromedriver are not installed "
               "(apt-get install -y chromium chromium-driver)")
    driver = start_chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.ui_failed = report.failed


@pytest.fixture(autouse=True)
def screenshot_on_failure(request, tmp_path: Path) -> Iterator[None]:
    yield
    if not getattr(request.node, "ui_failed", False) or "browser" not in request.fixturenames:
        return
    driver = request.getfixturevalue("browser")
    driver.save_screenshot(str(tmp_path / "failure.png"))
    logs = driver.get_log("browser")
    (tmp_path / "browser.log").write_text("\n".join(map(str, logs)))
    print(f"screenshot of the failure: {tmp_path / 'failure.png'}")
