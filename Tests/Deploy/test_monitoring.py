"""The alert rules and the Grafana dashboard name only metrics and labels the gateway exports:
every `gatehouse_*` series an expression uses is a metric the sources register (a Prometheus
histogram adds `_bucket`, `_sum` and `_count`), with labels among those the sources give it."""

import json

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / "Deploy" / "monitoring" / "gatehouse-alerts.yaml"
DASHBOARD = ROOT / "Deploy" / "monitoring" / "gatehouse-dashboard.json"


def exported_metrics():
    """Metric name → label names, read from the sources' registrations."""
    metrics = {}
    pattern = re.compile(r'label: "(gatehouse_[a-z_]+)"(?:,\s*dimensions: \[([^\]]*)\])?')
    for path in (ROOT / "Sources").rglob("*.swift"):
        text = path.read_text()
        for name, dimensions in pattern.findall(text):
            labels = set(re.findall(r'\("([a-z_]+)",', dimensions or ""))
            metrics.setdefault(name, set()).update(labels)
        # Counters made through GatehouseMetrics.counter(name, [(label, value), …]).
        for name, dimensions in re.findall(r'counter\("(gatehouse_[a-z_]+)", \[([^\]]*)\]', text):
            metrics.setdefault(name, set()).update(re.findall(r'\("([a-z_]+)",', dimensions))
        # … or with the labels in a variable defined just before (`let dimensions = [(…)]`),
        # passed to GatehouseMetrics.counter or to a handle's initializer (`label: "…",
        # dimensions: dimensions`).
        variable_forms = r'counter\("(gatehouse_[a-z_]+)", ([a-zA-Z]+)\)|label: "(gatehouse_[a-z_]+)",\s*dimensions: ([a-zA-Z]+)\b'
        for match in re.finditer(variable_forms, text):
            name, variable = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
            definitions = re.findall(r"let " + variable + r" = \[([^\]]*)\]", text[: match.start()])
            if definitions:
                metrics.setdefault(name, set()).update(re.findall(r'\("([a-z_]+)",', definitions[-1]))
        # Gauges registered on the Prometheus registry itself
        # (`registry.makeGauge(descriptor: .described("…"), labels: […])`).
        for name, labels in re.findall(r'makeGauge\(\s*descriptor: \.described\("(gatehouse_[a-z_]+)"\), labels: \[([^\]]*)\]', text):
            metrics.setdefault(name, set()).update(re.findall(r'\("([a-z_]+)",', labels))
        for name in re.findall(r'metricName: "(gatehouse_[a-z_]+)"', text):
            metrics.setdefault(name + "_info", set())
    return metrics


def check_expression(where, expression, exported):
    """Every gatehouse_* metric of `expression` exported, with the labels it selects on."""
    for name, selector in re.findall(r"(gatehouse_[a-z_]+)(\{[^}]*\})?", expression):
        base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in exported else name
        assert base in exported, f"{where}: {name} is not a metric the gateway exports"
        used = set(re.findall(r"([a-z_]+)\s*=~?", selector or "")) - {"instance", "job", "le"}
        assert used <= exported[base], f"{where}: {name} has no label {used - exported[base]}"
    for labels in re.findall(r"by \(([^)]*)\)", expression):
        for label in {label.strip() for label in labels.split(",")} - {"instance", "job", "le"}:
            assert any(label in exported[metric] for metric in exported), f"{where}: no metric has the label {label}"


def test_every_alert_names_exported_metrics_and_labels():
    exported = exported_metrics()
    assert "gatehouse_http_requests_total" in exported and "route" in exported["gatehouse_http_requests_total"]
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    assert len(rules) >= 8
    for rule in rules:
        check_expression(rule["alert"], rule["expr"], exported)


def test_every_dashboard_panel_names_exported_metrics_and_labels():
    exported = exported_metrics()
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(targets) >= 12
    for title, expression in targets:
        assert "gatehouse_" in expression or "process_" in expression, title
        check_expression(title, expression, exported)
