"""deploy/compose: Grafana + Alloy + logstore. No container engine runs here, so the files are
checked for what would break the stack: paths, the data source's address, and Alloy's push
URL, which an in-process logstore must accept."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

import config as config_module
from tests.deploy.container_file import CONTAINERFILE, ROOT, instructions, last, words
from tests.helpers import JSON_HEADERS, now_ns, push_body

COMPOSE = ROOT / "deploy" / "compose"
STACK = yaml.safe_load((COMPOSE / "docker-compose.yaml").read_text())
DEFAULT_PORT = config_module.config_from_dict({}).server.http_listen_port


def test_the_stack_and_its_files():
    services = STACK["services"]
    assert set(services) == {"logstore", "alloy", "grafana"}
    build = services["logstore"]["build"]
    assert (COMPOSE / build["context"] / build["dockerfile"]).resolve() == CONTAINERFILE
    # the named volume sits where the image keeps its data
    volume = [v for v in services["logstore"]["volumes"] if v.startswith("logstore-data:")]
    assert [v.split(":")[1] for v in volume] == words(last(instructions(
        CONTAINERFILE.read_text()), "VOLUME"))
    assert f"{DEFAULT_PORT}:{DEFAULT_PORT}" in services["logstore"]["ports"]
    # an init at PID 1 reaps the query workers (their zygote ends before them)
    assert services["logstore"]["init"] is True
    # every file or folder of this repository that the stack mounts exists
    relative = [v.split(":")[0] for s in services.values() for v in s.get("volumes", [])
                if v.startswith("./")]
    assert relative and [p for p in relative if not (COMPOSE / p).exists()] == []
    # both wait for the image's HEALTHCHECK on /ready
    for name in ("alloy", "grafana"):
        assert services[name]["depends_on"] == {"logstore": {"condition": "service_healthy"}}


def test_grafana_data_source_points_at_logstore():
    provisioning = COMPOSE / "grafana" / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "logstore.yaml").read_text())[
        "datasources"]
    assert source["type"] == "loki"
    url = urlsplit(source["url"])
    assert (url.scheme, url.hostname, url.port) == ("http", "logstore", DEFAULT_PORT)
    assert "logstore" in STACK["services"]


def alloy_push_url() -> str:
    text = (COMPOSE / "alloy" / "config.alloy").read_text()
    (url,) = re.findall(r'loki\.write "logstore" \{\s*endpoint \{\s*url\s*=\s*"([^"]+)"', text)
    # every source forwards to that writer
    sources = re.findall(r'^loki\.source\.(\w+) "', text, re.M)
    assert sources == ["docker", "journal", "file"]
    assert len(re.findall(r"forward_to\s*=\s*\[loki\.write\.logstore\.receiver\]", text)) == 3
    return url


def test_alloy_pushes_where_logstore_answers(make_client):
    url = urlsplit(alloy_push_url())
    assert (url.scheme, url.hostname, url.port) == ("http", "logstore", DEFAULT_PORT)
    client = make_client()
    ts = now_ns()
    r = client.post(url.path, content=push_body({"job": "varlog"}, [[str(ts), "from alloy"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 204, r.text
    r = client.get("/loki/api/v1/query_range",
                   params={"query": '{job="varlog"}', "start": ts - 1, "end": ts + 1})
    assert [v[1] for s in r.json()["data"]["result"] for v in s["values"]] == ["from alloy"]
