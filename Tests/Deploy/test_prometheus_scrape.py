"""A real Prometheus scrapes a running gateway (`gatehouse demo`, the debug build scripts/test
made): the target is up, the gateway's series are stored, the shipped alert rules load and
evaluate against them; and promtool lints the exposition (a `# HELP` for every family)."""

import json
import pathlib
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GATEHOUSE = ROOT / ".build" / "debug" / "gatehouse"
RULES = ROOT / "Deploy" / "monitoring" / "gatehouse-alerts.yaml"


def get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


@pytest.fixture
def demo(tmp_path):
    """A running demo and the URL of its operations listener."""
    process = subprocess.Popen(
        [str(GATEHOUSE), "demo", "--port", "0", "--emulator-port", "0", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    operations = gateway = None
    deadline = time.time() + 60
    while (operations is None or gateway is None) and time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("Operations (/metrics, /readyz) at "):
            operations = line.split(" at ", 1)[1].strip()
        if line.startswith("Gatehouse ready at "):
            gateway = line.split(" at ", 1)[1].strip()
    try:
        assert operations and gateway, "the demo did not start"
        get(gateway + "/healthz")  # a request, so the request series exist
        yield operations
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_exposition_passes_promtool_and_every_family_has_help(demo):
    exposition = get(demo + "/metrics")
    lint = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()
    text = exposition.decode()
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE gatehouse_")}
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP gatehouse_") and len(line.split()) > 3}
    assert families and families <= helped, f"no help: {sorted(families - helped)}"


def listening_prometheus(config, storage):
    """Prometheus on a port the kernel handed out a moment before (retried if taken meanwhile)."""
    for _ in range(3):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        process = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={storage}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline and process.poll() is None:
            try:
                get(f"http://127.0.0.1:{port}/-/ready")
                return process, port
            except OSError:
                time.sleep(0.2)
        process.kill()
        process.wait()
    raise AssertionError("prometheus did not start")


def test_prometheus_scrapes_the_gateway_and_loads_the_alert_rules(demo, tmp_path):
    target = demo.removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        f"scrape_configs:\n  - job_name: gatehouse\n    static_configs:\n      - targets: ['{target}']\n")
    process, port = listening_prometheus(config, tmp_path / "tsdb")
    api = f"http://127.0.0.1:{port}/api/v1"
    try:
        deadline = time.time() + 60
        up = []
        while time.time() < deadline:
            up = json.loads(get(api + "/query?query=up%7Bjob%3D%22gatehouse%22%7D"))["data"]["result"]
            if up and up[0]["value"][1] == "1":
                break
            time.sleep(0.5)
        assert up and up[0]["value"][1] == "1", f"the gateway is not up for Prometheus: {up}"
        build = json.loads(get(api + "/query?query=gatehouse_build_info"))["data"]["result"]
        assert build and build[0]["metric"]["version"], build
        requests = json.loads(get(api + "/query?query=gatehouse_http_requests_total"))["data"]["result"]
        assert any(series["metric"].get("route") == "/healthz" for series in requests), requests
        groups = json.loads(get(api + "/rules"))["data"]["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        assert rules and all(rule["health"] in ("ok", "unknown") for rule in rules), rules
    finally:
        process.terminate()
        process.wait(timeout=30)
