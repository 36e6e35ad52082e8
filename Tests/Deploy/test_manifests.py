"""What the reference deployment's manifests promise operators, checked where no schema can:
in-cluster callers and providers get through the NetworkPolicy, the migrate Job can be applied
once per release and gives up, the probes ask the operations listener, and the systemd unit
allows enough file descriptors and starts without asking the providers."""

import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "Deploy" / "kubernetes"


def load(name):
    return yaml.safe_load((KUBERNETES / name).read_text())


def test_network_policy_lets_labelled_callers_and_providers_through():
    spec = load("networkpolicy.yaml")["spec"]
    callers = [
        rule for rule in spec["ingress"]
        if any(peer.get("podSelector", {}).get("matchLabels") == {"gatehouse-client": "true"} and peer.get("namespaceSelector") == {}
               for peer in rule["from"])
    ]
    assert callers and all(port["port"] == 8080 for rule in callers for port in rule["ports"])
    providers = [
        rule for rule in spec["egress"]
        if any(peer.get("podSelector", {}).get("matchLabels") == {"gatehouse-identity-provider": "true"} for peer in rule["to"])
    ]
    assert providers and all("ports" not in rule for rule in providers), "any port of a labelled in-cluster provider"
    # Monitoring still reaches the operations port, and nothing else does.
    ops = [rule for rule in spec["ingress"] if any(port["port"] == 9090 for port in rule["ports"])]
    assert len(ops) == 1


def test_pods_carry_no_service_account_token():
    """Gatehouse never calls the Kubernetes API: neither its pods nor the migrate Job's hold a token for it."""
    for name in ["deployment.yaml", "migrate-job.yaml"]:
        assert load(name)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False, name


def test_operator_secrets_stay_out_of_git_and_images():
    """Compose's ./secrets and .env and a demo's encryption.key, created beside the deployment files, are
    ignored by git and left out of the Docker build context."""
    import subprocess
    paths = ["Deploy/compose/secrets/gatehouse_encryption_key", "Deploy/compose/.env", "gatehouse-data/encryption.key"]
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *paths], capture_output=True, text=True).stdout.split()
    assert sorted(ignored) == sorted(paths)
    patterns = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")}
    assert {"Deploy/compose/secrets", "Deploy/compose/.env", "**/encryption.key"} <= patterns


def test_migrate_job_is_per_release_and_bounded():
    job = load("migrate-job.yaml")
    assert "${GATEHOUSE_VERSION}" in job["metadata"]["name"]
    assert 0 < job["spec"]["activeDeadlineSeconds"] <= 3600


def test_systemd_unit_raises_the_descriptor_limit():
    unit = (ROOT / "Deploy" / "systemd" / "gatehouse.service").read_text().splitlines()
    limits = [line.split("=", 1)[1] for line in unit if line.startswith("LimitNOFILE=")]
    assert limits and int(limits[0]) >= 65536


def test_probes_ask_the_operations_listener():
    container = load("deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["ops"] == 9090
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] == "ops", probe


def test_systemd_unit_starts_without_asking_the_providers():
    unit = (ROOT / "Deploy" / "systemd" / "gatehouse.service").read_text().splitlines()
    assert not any(line.startswith("ExecStartPre=") and "check" in line for line in unit), \
        "check --offline fetches every provider's discovery: one provider down would stop the start"
