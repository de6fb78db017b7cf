"""Screenshots of the web page for docs/ (README "Web page"): a real server with the loghub
lines of tests/ui/harness.py, a few dashboards, and headless Chromium.

    PYTHONPATH=. .venv/bin/python bench/ui_screenshots.py [OUT_DIR (default docs)]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import LogstoreServer  # noqa: E402
from tests.ui.harness import grafana_objects, loghub_streams, push, start_chromium  # noqa: E402


def until(driver, css: str, timeout: float = 10):
    return WebDriverWait(driver, timeout, 0.05).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, css))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = LogstoreServer(Path(tmp) / "data", {"grafana": {"admin_password": "admin"}})
        server.start()
        try:
            push(server, loghub_streams(time.time_ns()))
            grafana_objects(server.url)
            for dark in (False, True):
                driver = start_chromium(1280, 800, dark=dark)
                try:
                    shoot(driver, server, out, "-dark" if dark else "")
                finally:
                    driver.quit()
        finally:
            server.stop()


def shoot(driver, server: LogstoreServer, out: Path, suffix: str) -> None:
    q = httpx.QueryParams({"q": '{job="loghub"} |~ "(?i)error|warn"', "limit": "200"})
    driver.get(f"{server.url}/?{q}")
    until(driver, "#volume rect.bar")
    until(driver, "#lines .row")[1].click()
    driver.save_screenshot(str(out / f"ui-explore{suffix}.png"))
    if suffix:
        return
    q = httpx.QueryParams({"q": 'sum by (system) (count_over_time({job="loghub"} [30s]))'})
    driver.get(f"{server.url}/?{q}")
    until(driver, "#chart polyline")
    driver.save_screenshot(str(out / "ui-metrics.png"))
    driver.get(f"{server.url}/?" + str(httpx.QueryParams({"view": "tail", "q": '{job="loghub"}'})))
    WebDriverWait(driver, 10, 0.05).until(
        lambda d: d.find_element(By.ID, "tail-status").text.startswith("Connected"))
    now = time.time_ns()
    push(server, [({"job": "loghub", "system": "demo", "level": "info"},
                   [[str(now + i), f'level=info msg="live line {i}" user=u{i}']
                    for i in range(5)])])
    until(driver, "#tail-lines .row")
    driver.save_screenshot(str(out / "ui-tail.png"))
    driver.get(f"{server.url}/?view=dashboards")
    until(driver, "#login-user")[0].send_keys("admin")
    driver.find_element(By.ID, "login-password").send_keys("admin\n")
    until(driver, "#search-results table")
    driver.save_screenshot(str(out / "ui-dashboards.png"))


if __name__ == "__main__":
    main(ROOT / (sys.argv[1] if len(sys.argv) > 1 else "docs"))
