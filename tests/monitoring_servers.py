"""Real Prometheus, Pushgateway and Alertmanager servers for the monitoring tests.

The binaries come from Debian's packages (``prometheus``, ``prometheus-pushgateway``,
``prometheus-alertmanager``), which ``.ci/run`` installs. Each test starts the servers it needs
on free loopback ports with its own configuration (scrape targets, rule files, receivers) and
stops them afterwards, so tests never share state. Without the binaries a test is skipped
with the reason, except where ``PERFGATE_REQUIRE_MONITORING=1`` (CI sets it): there a missing
server fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

BINARIES = {
    "prometheus": "prometheus",
    "pushgateway": "prometheus-pushgateway",
    "alertmanager": "prometheus-alertmanager",
    "promtool": "promtool",
    "amtool": "amtool",
}


def binary(name: str) -> str:
    """The path of a monitoring binary; skips (or, where required, fails) without it."""
    found = shutil.which(BINARIES[name])
    if found is None:
        reason = (
            f"{BINARIES[name]} is not installed (apt-get install prometheus "
            "prometheus-pushgateway prometheus-alertmanager; .ci/run does)"
        )
        if os.environ.get("PERFGATE_REQUIRE_MONITORING") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    """A started server: its base URL and its process."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


@contextmanager
def started(name: str, args: list[str], folder: Path) -> Iterator[Server]:
    """Start ``name`` with ``args`` plus a free listen address; wait for ``/-/ready``."""
    port = free_port()
    log = folder / f"{name}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [binary(name), *args, f"--web.listen-address=127.0.0.1:{port}"],
            stdout=output, stderr=subprocess.STDOUT, cwd=folder,
        )  # fmt: skip
    server = Server(name=name, url=f"http://127.0.0.1:{port}", process=process, log=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{name} did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def pushgateway(folder: Path) -> Iterator[Server]:
    with started("pushgateway", [], folder) as server:
        yield server


@contextmanager
def prometheus(
    folder: Path,
    targets: dict[str, str],
    *,
    rule_files: Sequence[Path] = (),
    alertmanager: str | None = None,
) -> Iterator[Server]:
    """Prometheus scraping each ``targets`` job (name → host:port) every second, evaluating
    ``rule_files`` every second and alerting ``alertmanager`` (its base URL)."""
    scrape = [
        {
            "job_name": job,
            "honor_labels": True,  # the pushed runs keep their own labels
            "scrape_interval": "1s",
            "static_configs": [{"targets": [target]}],
        }
        for job, target in targets.items()
    ]
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": scrape,
        "rule_files": [str(path) for path in rule_files],
    }
    if alertmanager is not None:
        host = urllib.parse.urlparse(alertmanager).netloc
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [host]}]}]}
    (folder / "prometheus.yml").write_text(json.dumps(config))  # YAML is a superset of JSON
    args = [
        f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'tsdb'}",
    ]
    with started("prometheus", args, folder) as server:
        yield server


@contextmanager
def alertmanager_server(folder: Path, config: Path) -> Iterator[Server]:
    args = [
        f"--config.file={config}",
        f"--storage.path={folder / 'alertmanager'}",
        "--cluster.listen-address=",
    ]
    with started("alertmanager", args, folder) as server:
        yield server


def query(prometheus: Server, promql: str) -> list[dict[str, Any]]:
    """The instant vector of ``promql`` (``data.result``)."""
    url = f"{prometheus.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    answer = get_json(url)
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def wait_for(prometheus: Server, promql: str, timeout: float = 60) -> list[dict[str, Any]]:
    """Poll until ``promql`` returns a non-empty vector; fails with Prometheus's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = query(prometheus, promql)
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"{promql} stayed empty for {timeout:.0f} s: {prometheus.log.read_text()[-2000:]}")


@dataclass
class Webhook:
    """A local HTTP receiver for Alertmanager's webhook: every POSTed body, in order."""

    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)


@contextmanager
def webhook() -> Iterator[Webhook]:
    port = free_port()
    hook = Webhook(url=f"http://127.0.0.1:{port}")

    class Receive(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            hook.bodies.append({"path": self.path, **json.loads(self.rfile.read(length))})
            hook.arrived.set()
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Receive)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        thread.join(timeout=5)
