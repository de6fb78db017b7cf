"""The built-in web page (README "Web page") in a real headless Chromium against a real
server holding loghub lines: what a person sees after typing, clicking and going back."""

from __future__ import annotations

import time

import httpx
import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from tests.ui.harness import ADMIN, VIEWER, push

WAIT = 10  # seconds an explicit wait may take before the test fails


def wait(driver, condition, timeout: float = WAIT, message: str = ""):
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition, message)


def css(driver, selector: str):
    return driver.find_element(By.CSS_SELECTOR, selector)


def open_page(driver, server, query_string: str = "", view: str = "explore") -> None:
    """Load the page and wait until it shows `view`; the previous page's state is gone."""
    driver.get(server.url + "/" + query_string)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'body[data-view="{view}"]'),
         message=f"the {view} view did not show")


def run_query(driver, text: str) -> None:
    """Type the query as a person does and run it with Ctrl+Enter; waits until the page
    reports the answer (a line count or an error)."""
    box = css(driver, "#query")
    box.clear()
    box.send_keys(text)
    box.send_keys(Keys.CONTROL, Keys.ENTER)  # the page says "Running…" before this returns
    wait(driver, lambda d: css(d, "#error").is_displayed() or " in " in css(d, "#status").text,
         message=f"no answer shown for {text}")


def shown_lines(driver) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#lines .row .line')].map(e => e.textContent)")


def api_lines(server, query: str, limit: int = 1000, tenant: str | None = None) -> list[str]:
    r = httpx.get(server.url + "/logstore/api/v1/query_range",
                  params={"query": query, "limit": limit, "since": "1h"},
                  headers={"X-Scope-OrgID": tenant} if tenant else {})
    assert r.status_code == 200, r.text
    entries = [(int(ts), line) for s in r.json()["data"]["result"] for ts, line in s["values"]]
    return [line for _, line in sorted(entries, reverse=True)]


def test_the_page_and_its_files_are_served_with_types_and_validators(ui_server):
    page = httpx.get(ui_server.url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-cache"
    assert 'src="ui/app.js"' in page.text and 'src="/' not in page.text  # relative only
    js = httpx.get(ui_server.url + "/ui/app.js")
    assert js.headers["content-type"].startswith("text/javascript")
    again = httpx.get(ui_server.url + "/ui/app.js", headers={"If-None-Match": js.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    css_file = httpx.get(ui_server.url + "/ui/style.css")
    assert css_file.headers["content-type"].startswith("text/css")
    missing = httpx.get(ui_server.url + "/ui/nope.js")
    assert missing.status_code == 404 and "nope.js" in missing.text
    assert httpx.get(ui_server.url + "/ui/..%2Fapp.py").status_code == 404


def test_the_page_loads_without_console_errors(ui_server, browser):
    open_page(browser, ui_server)
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#query"), message="no query box")
    assert browser.title == "logstore"
    assert css(browser, "#nav a[aria-current=page]").text == "Explore"
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_a_typed_query_shows_the_apis_lines_highlighted_and_volume_bars(ui_server, browser):
    open_page(browser, ui_server)
    query = '{system="hdfs"} |= "Receiving"'
    run_query(browser, query)
    expected = api_lines(ui_server, query)
    assert expected, "the loghub HDFS lines mention Receiving"
    assert shown_lines(browser) == expected
    marks = browser.execute_script(
        "return [...document.querySelectorAll('#lines mark')].map(e => e.textContent)")
    assert len(marks) == len(expected) and set(marks) == {"Receiving"}
    # the histogram: bars by level, as many lines as the list holds
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#volume rect.bar"),
         message="no histogram bars")
    levels = {e.get_attribute("data-level")
              for e in browser.find_elements(By.CSS_SELECTOR, "#volume rect.bar")}
    assert levels == {"info"}
    total = browser.execute_script(
        "return [...document.querySelectorAll('#volume rect.bar title')]"
        ".reduce((n, t) => n + Number(t.textContent.split(': ')[1].split(' ')[0]), 0)")
    assert total == len(expected)
    assert "q=" in browser.current_url
    # a line opens to its stream labels and structured metadata, and closes again
    first = css(browser, "#lines .row")
    first.click()
    details = css(browser, "#lines .row + .details")
    assert first.get_attribute("aria-expanded") == "true"
    pairs = browser.execute_script(
        "return [...arguments[0].querySelectorAll('section')].map(s => [s.querySelector('h4')"
        ".textContent, [...s.querySelectorAll('tr')].map(r => r.cells[0].textContent + '=' +"
        " r.cells[1].textContent)])", details)
    assert pairs[0] == ["Stream labels", ["job=loghub", "level=info", "service_name=loghub",
                                          "system=hdfs"]]
    assert pairs[1] == ["Structured metadata", ["detected_level=info"]]
    first.send_keys(Keys.ENTER)
    assert not browser.find_elements(By.CSS_SELECTOR, "#lines .details")


def test_dragging_across_the_histogram_zooms_the_range(ui_server, browser):
    open_page(browser, ui_server)
    run_query(browser, '{job="loghub"}')
    svg = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#volume svg"),
               message="no histogram")[0]
    assert css(browser, "#range").get_attribute("value") == "1h"
    width = svg.size["width"]
    # from 88% to 97% of the width (offsets count from the centre): across the last ten
    # minutes, where the lines are
    ActionChains(browser).move_to_element_with_offset(svg, int(width * 0.38), 0) \
        .click_and_hold().move_by_offset(int(width * 0.09), 0).release().perform()
    wait(browser, lambda d: css(d, "#range").get_attribute("value") == "abs",
         message="the range did not become absolute")
    params = httpx.URL(browser.current_url).params
    start, end = int(params["from"]), int(params["to"])
    # the drag's share of the hour's axis (which is 95% of the width), ending minutes ago
    assert 5 * 60e3 < end - start < 6.5 * 60e3
    assert 0 < time.time() * 1000 - end < 5 * 60e3
    wait(browser, lambda d: " in " in css(d, "#status").text, message="no answer")
    expected = api_lines_between(ui_server, '{job="loghub"}', start, end)
    assert 0 < len(shown_lines(browser)) == len(expected)


def api_lines_between(server, query: str, start_ms: int, end_ms: int) -> list:
    r = httpx.get(server.url + "/logstore/api/v1/query_range",
                  params={"query": query, "limit": 1000, "start": f"{start_ms}000000",
                          "end": f"{end_ms}000000"})
    assert r.status_code == 200, r.text
    return [v for s in r.json()["data"]["result"] for v in s["values"]]


def test_clicking_a_label_value_puts_it_into_the_query(ui_server, browser):
    open_page(browser, ui_server)
    css(browser, "#query").clear()
    css(browser, "#label-browser summary").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#label-names [data-label="system"]'),
         message="label names not listed")
    css(browser, '#label-names [data-label="system"]').click()
    wait(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, '#label-values [data-value="zookeeper"]'),
        message="values of system not listed")
    values = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#label-values button")]
    assert values == ["apache", "hdfs", "zookeeper"]
    css(browser, '#label-values [data-value="zookeeper"]').click()
    assert css(browser, "#query").get_attribute("value") == '{system="zookeeper"}'
    # a second value of the same label replaces the first; another label is added
    css(browser, '#label-values [data-value="apache"]').click()
    css(browser, '#label-names [data-label="level"]').click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#label-values [data-value="error"]'))
    css(browser, '#label-values [data-value="error"]').click()
    assert css(browser, "#query").get_attribute("value") == '{system="apache", level="error"}'


def test_back_restores_the_previous_query_and_its_lines(ui_server, browser):
    open_page(browser, ui_server)
    first, second = '{system="apache", level="error"}', '{system="zookeeper"} |= "WARN"'
    run_query(browser, first)
    first_lines = shown_lines(browser)
    assert first_lines == api_lines(ui_server, first)
    run_query(browser, second)
    assert shown_lines(browser) == api_lines(ui_server, second) != first_lines
    browser.back()
    wait(browser, lambda d: css(d, "#query").get_attribute("value") == first,
         message="Back did not restore the query")
    wait(browser, lambda d: shown_lines(d) == first_lines, message="nor its lines")


def test_an_invalid_query_shows_the_apis_parse_error(ui_server, browser):
    open_page(browser, ui_server)
    bad = '{system="apache"} |= '
    api = httpx.get(ui_server.url + "/logstore/api/v1/query_range", params={"query": bad})
    assert api.status_code == 400 and "parse error" in api.text
    run_query(browser, bad)
    wait(browser, lambda d: css(d, "#error").is_displayed(), message="no error shown")
    assert css(browser, "#error").text == api.text.strip()
    assert shown_lines(browser) == []


def test_tail_shows_a_line_pushed_after_it_connected(ui_server, browser):
    query = '{system="tailed"}'
    open_page(browser, ui_server, "?" + str(httpx.QueryParams({"view": "tail", "q": query})),
              view="tail")
    wait(browser, lambda d: css(d, "#tail-status").text.startswith("Connected"),
         message="the tail did not connect")
    line = f"a line pushed at {time.time_ns()} while the page tails"
    push(ui_server, [({"system": "tailed"}, [[str(time.time_ns()), line]])])
    try:
        wait(browser, lambda d: line in tailed(d), timeout=3)
    except TimeoutException:
        pytest.fail("the pushed line did not appear in the tail within 3 s")
    # paused, a new line waits in the buffer; resumed, it shows
    css(browser, "#tail-pause").click()
    assert css(browser, "#tail-pause").text == "Resume"
    held = f"a line pushed at {time.time_ns()} while paused"
    push(ui_server, [({"system": "tailed"}, [[str(time.time_ns()), held]])])
    wait(browser, lambda d: "1 new line waiting" in css(d, "#tail-status").text,
         message="the paused tail did not receive the line")
    assert held not in tailed(browser)
    css(browser, "#tail-pause").click()
    assert tailed(browser)[-2:] == [line, held]


def tailed(driver) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#tail-lines .row .line')].map(e => e.textContent)")


def search_titles(driver) -> list[str]:
    # read in one script: the page re-renders the results while a search is typed, and an
    # element found by one WebDriver call can be gone by the next (a stale element)
    return [t.replace(" \u2605", "") for t in driver.execute_script(
        "return [...document.querySelectorAll('#search-results td.title')]"
        ".map(e => e.innerText.trim())")]


def test_search_as_a_viewer_finds_dashboards_but_not_a_folder_it_may_not_see(ui_server, browser):
    admin = httpx.get(ui_server.url + "/api/search", auth=ADMIN).json()
    assert "Team Payments" in [h["title"] for h in admin]  # the folder exists
    viewer = [h["title"] for h in httpx.get(ui_server.url + "/api/search", auth=VIEWER).json()]
    open_page(browser, ui_server, "?view=dashboards", view="dashboards")
    wait(browser, lambda d: d.find_elements(By.ID, "login-user"), message="no login form")
    css(browser, "#login-user").send_keys(VIEWER[0])
    css(browser, "#login-password").send_keys(VIEWER[1], Keys.ENTER)
    wait(browser, lambda d: search_titles(d), message="no search results")
    assert search_titles(browser) == viewer and "Team Payments" not in viewer
    assert css(browser, "#who").text.startswith("Logged in as alice")
    css(browser, "#search-query").send_keys("hdfs", Keys.ENTER)
    wait(browser, lambda d: search_titles(d) == ["HDFS blocks"], message="search for hdfs")
    # signed in by a session cookie no script can read; the password is kept nowhere
    assert browser.execute_script("return localStorage.length + sessionStorage.length") == 0
    assert browser.execute_script("return document.cookie") == ""
    assert [(c["name"], c["httpOnly"]) for c in browser.get_cookies()] == [
        ("logstore_session", True)]
    # a reload keeps the session without the form; logging out ends it
    browser.refresh()
    wait(browser, lambda d: search_titles(d) == viewer, message="search after a reload")
    assert css(browser, "#who").text.startswith("Logged in as alice")
    css(browser, "#logout").click()
    wait(browser, lambda d: d.find_elements(By.ID, "login-user"), message="no form after logout")
    assert browser.get_cookies() == []


RULES = """name: loghub-errors
interval: 1s
rules:
  - alert: ApacheErrors
    expr: sum(count_over_time({system="apache", level="error"}[1h])) > 0
    labels: {severity: page}
"""


def test_alerts_show_the_group_its_rule_and_the_firing_alert(ui_server, browser):
    r = httpx.post(ui_server.url + "/logstore/api/v1/rules/ui", content=RULES,
                   headers={"Content-Type": "application/yaml"})
    assert r.status_code == 202, r.text

    def firing() -> bool:
        alerts = httpx.get(ui_server.url + "/compat/api/v1/alerts").json()["data"]["alerts"]
        return any(a["state"] == "firing" for a in alerts)
    wait(None, lambda _: firing(), message="the rule did not fire")  # the state shown below
    open_page(browser, ui_server, "?view=alerts", view="alerts")
    wait(browser, lambda d: "1 firing alert" in css(d, "#alerts-summary").text,
         message="no firing alert shown")
    group = css(browser, "#alert-groups .group")
    assert "loghub-errors" in group.find_element(By.TAG_NAME, "h3").text
    row = group.find_element(By.CSS_SELECTOR, "tbody tr").text
    assert "ApacheErrors" in row and "firing" in row and "ok" in row
    assert 'severity="page"' in group.find_element(By.CSS_SELECTOR, "li.firing").text


def test_patterns_and_fields_lead_back_to_explore(ui_server, browser):
    query = '{system="hdfs"}'
    api = httpx.get(ui_server.url + "/logstore/api/v1/patterns",
                    params={"query": query, "since": "1h"})
    assert api.status_code == 200 and api.json()["data"], api.text
    open_page(browser, ui_server, "?" + str(httpx.QueryParams({"view": "patterns", "q": query})),
              view="patterns")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#patterns button[data-pattern]"),
         message="no patterns shown")
    top = max(api.json()["data"], key=lambda p: sum(int(c) for _, c in p["samples"]))
    first = css(browser, "#patterns button[data-pattern]")
    assert first.get_attribute("data-pattern") == top["pattern"]
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#fields button[data-field]'))
    first.click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, 'body[data-view="explore"]'))
    assert css(browser, "#query").get_attribute("value") == f"{query} |> `{top['pattern']}`"
    wait(browser, lambda d: " in " in css(d, "#status").text or css(d, "#error").is_displayed())
    assert not css(browser, "#error").is_displayed()
    assert len(shown_lines(browser)) == sum(int(c) for _, c in top["samples"])


def test_a_tail_the_server_refuses_shows_why(ui_server, browser):
    bad = '{system="tailed"} |~ "("'
    api = httpx.get(ui_server.url + "/logstore/api/v1/query_range", params={"query": bad})
    assert api.status_code == 400
    open_page(browser, ui_server, "?" + str(httpx.QueryParams({"view": "tail", "q": bad})),
              view="tail")
    wait(browser, lambda d: css(d, "#tail-error").is_displayed(), message="no error shown")
    assert css(browser, "#tail-error").text == api.text.strip()
    assert css(browser, "#tail-status").text == "Disconnected."


def test_the_tenant_field_shows_that_tenants_lines_and_tails_them(tenant_server, browser):
    """auth_enabled: the page asks Loki's API for the tenant of its header field (in the URL
    like the rest of its state), and its tail names the tenant in a subprotocol."""
    query = '{job="tenants"}'
    mine = api_lines(tenant_server, query, tenant="team-a")
    assert len(mine) == 5 and all(line.startswith("line of team A") for line in mine)
    open_page(browser, tenant_server, "?" + str(httpx.QueryParams({"q": query})))
    # no tenant yet: the API's own answer
    wait(browser, lambda d: css(d, "#error").is_displayed(), message="no error without a tenant")
    assert css(browser, "#error").text == "no org id"
    field = css(browser, "#tenant")
    field.send_keys("team-a", Keys.ENTER)
    wait(browser, lambda d: " in " in css(d, "#status").text, message="no lines for team-a")
    assert shown_lines(browser) == mine
    assert "tenant=team-a" in browser.current_url
    # the live tail of the same tenant: a line pushed to team-a (stored there, as the API
    # says) shows up, one pushed to team-b just before it does not
    css(browser, '#nav a[data-view="tail"]').click()
    wait(browser, lambda d: css(d, "#tail-status").text.startswith("Connected"),
         message="the tail did not connect with the tenant's subprotocol")
    other = f"tailed for team-b at {time.time_ns()}"
    push(tenant_server, [({"job": "tenants"}, [[str(time.time_ns()), other]])], tenant="team-b")
    line = f"tailed for team-a at {time.time_ns()}"
    push(tenant_server, [({"job": "tenants"}, [[str(time.time_ns()), line]])], tenant="team-a")
    assert api_lines(tenant_server, query, tenant="team-a")[0] == line
    wait(browser, lambda d: line in tailed(d), timeout=3,
         message="the line pushed to team-a did not appear in its tail within 3 s")
    assert not [t for t in tailed(browser) if "team-b" in t or "team B" in t]
    # a tenant the server refuses: its reason, as for the header
    # typed over the old value as a person does: WebDriver's clear() fires a change of its
    # own, and the tail's answer to an empty tenant ("no org id") could be the error seen
    field = css(browser, "#tenant")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("a/b", Keys.ENTER)
    wait(browser, lambda d: css(d, "#tail-error").is_displayed(), message="no error shown")
    assert css(browser, "#tail-error").text == "tenant ID 'a/b' contains unsupported character '/'"
