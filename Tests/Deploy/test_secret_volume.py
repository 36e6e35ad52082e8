"""The Kubernetes manifests' secret volume as the kubelet lays it out, read by the real binary
running as the manifests' user.

The kubelet writes a secret volume atomically: the files in a timestamped folder, a `..data`
symlink to it, and one symlink per key to `..data/KEY`; every file owned by root with the
volume's `defaultMode`. With the pod's `fsGroup`, it then gives the files that group and adds
group read (volume ownership management of a read-only volume). `kubernetes-validate` cannot
see whether the process can read its own secrets; this test runs `gatehouse config show` as the
pod's `runAsUser`/`runAsGroup` (plus `fsGroup` as a supplementary group, as the runtime does)
against that layout. Needs root (to own files as the kubelet does and switch users).
"""

import base64
import os
import shutil
import subprocess
import tempfile
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "Deploy" / "kubernetes"
BINARY = pathlib.Path(os.environ.get("GATEHOUSE_BINARY", ROOT / ".build" / "debug" / "gatehouse"))


def pod_spec(manifest):
    """The pod template's spec of a Deployment or Job manifest."""
    document = yaml.safe_load((KUBERNETES / manifest).read_text())
    return document["spec"]["template"]["spec"]


def secret_keys():
    """The keys of the example Secret, without the database URL (the test uses SQLite)."""
    document = yaml.safe_load((KUBERNETES / "secret.example.yaml").read_text())
    return [key for key in document["stringData"] if key != "GATEHOUSE_DATABASE_URL"]


def lay_out_secret_volume(folder, values, default_mode, fs_group):
    """What the kubelet's atomic writer and ownership management leave in `folder`."""
    stamp = folder / "..2026_11_26_03_00_00.000000001"
    stamp.mkdir(mode=0o755)
    for key, value in values.items():
        path = stamp / key
        path.write_text(value)
        mode = default_mode
        group = 0
        if fs_group is not None:
            group = fs_group
            mode |= 0o440
        os.chown(path, 0, group)
        os.chmod(path, mode)
    if fs_group is not None:
        os.chown(stamp, 0, fs_group)
        os.chmod(stamp, 0o2755)
    (folder / "..data").symlink_to(stamp.name)
    for key in values:
        (folder / key).symlink_to(f"..data/{key}")


@pytest.mark.skipif(os.geteuid() != 0, reason="laying out files owned by root and another user needs root")
@pytest.mark.parametrize("manifest", ["deployment.yaml", "migrate-job.yaml"])
def test_the_pod_user_reads_its_secrets(manifest):
    assert BINARY.exists(), f"build the gatehouse product first ({BINARY})"
    spec = pod_spec(manifest)
    context = spec.get("securityContext", {})
    user = context["runAsUser"]
    group = context.get("runAsGroup", 0)
    fs_group = context.get("fsGroup")
    volume = next(v for v in spec["volumes"] if "secret" in v)
    default_mode = volume["secret"].get("defaultMode", 0o644)
    container = spec["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    assert mount.get("readOnly") is True, "the secrets are mounted read-only"
    secrets_dir_setting = next(e["value"] for e in container["env"] if e["name"] == "GATEHOUSE_SECRETS_DIR")
    assert secrets_dir_setting == mount["mountPath"]

    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        os.chmod(scratch, 0o755)
        secrets = scratch / "secrets"
        secrets.mkdir(mode=0o755)
        values = {key: "test-client-secret" for key in secret_keys()}
        values["GATEHOUSE_ENCRYPTION_KEY"] = base64.b64encode(os.urandom(32)).decode()
        lay_out_secret_volume(secrets, values, default_mode, fs_group)
        data = scratch / "data"
        data.mkdir(mode=0o700)
        os.chown(data, user, group)
        binary = scratch / "gatehouse"
        shutil.copy(BINARY, binary)
        os.chmod(binary, 0o755)

        groups = [str(fs_group)] if fs_group is not None else []
        command = ["setpriv", f"--reuid={user}", f"--regid={group}"]
        command += [f"--groups={','.join(groups)}"] if groups else ["--clear-groups"]
        environment = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(data),
            "GATEHOUSE_SECRETS_DIR": str(secrets),
            "GATEHOUSE_DATA_DIR": str(data),
            "GATEHOUSE_PUBLIC_URL": "https://auth.example.com",
            "GATEHOUSE_RETURN_TO_ALLOWLIST": "https://app.example.com/",
            "GATEHOUSE_GITHUB_CLIENT_ID": "test-client",
            "GATEHOUSE_MICROSOFT_CLIENT_ID": "11112222-bbbb-3333-cccc-4444dddd5555",
        }
        result = subprocess.run(
            command + [str(binary), "config", "show"], env=environment, capture_output=True, text=True, timeout=60)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{manifest}: as uid {user} gid {group} groups {groups}: {output}"
        assert "GATEHOUSE_ENCRYPTION_KEY" in output and values["GATEHOUSE_ENCRYPTION_KEY"] not in output, output
        assert "secrets folder" in output, output
