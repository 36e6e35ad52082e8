"""Runs the shell commands of the README and of every reference article (scripts/test).

Each ```sh block is preceded by a marker line:

    <!-- run: demo -->                      run against a fresh `gatehouse demo`
    <!-- run: demo, answers: CODE … -->     the same, and these problem codes are the answers it shows
    <!-- run: elsewhere — REASON -->        not run here; REASON names what runs it or why not

A block without a marker fails, so a new command is either run or says why not. The blocks of
one document run in order in one bash (`set -euo pipefail`), against a demo of their own on ports
it binds: the addresses the documents use (127.0.0.1:8080, :8081, :9090) are replaced by the
demo's. Before them, the shell has what the articles assume the reader did first:

    GW        the gateway (the walkthrough's)
    JAR       a cookie jar signed in as octocat (the walkthrough's steps 0-3)
    VERIFIER, CHALLENGE  the walkthrough's result verifier and its challenge
    KEY       a service key with every scope (ServiceKeys: `scripts/gatehouse keys create-service`)
    USER_ID   octocat's uid

A block fails when a command exits non-zero. In a block that names no problem codes every curl
runs with `--fail-with-body` (a `.curlrc` of the test's own), so any answer of 400 or above — the
gateway's or a provider's passed through — fails it; a block that names codes must show exactly
those problem documents, one per code named, and no other.
"""

import os
import json
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "Docs" / "Gatehouse.docc").glob("*.md"))
BLOCK = re.compile(r"(?:^|\n)([^\n]*)\n```(?:sh|bash)\n(.*?)\n```", re.S)
MARKER = re.compile(r"<!-- run: (demo(?:, answers: ([a-z\- ]+))?|elsewhere — .+) -->")
CODE = re.compile(r'"code"\s*:\s*"([a-z\-]+)"')
SEPARATOR = "::gatehouse-docs-state::"

PREAMBLE = r"""
set -euo pipefail
JAR=$(mktemp)
VERIFIER=$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=\n')
CHALLENGE=$(printf %s "$VERIFIER" | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '=')
AUTH=$(curl -s -c $JAR -b $JAR -o /dev/null -w '%{redirect_url}' "$GW/v1/auth/github.com/start?return_to=$GW/&login=octocat&result_challenge=$CHALLENGE")
CB=$(curl -s -o /dev/null -w '%{redirect_url}' "$AUTH")
curl -s -c $JAR -b $JAR -o /dev/null "$CB"
USER_ID=$(curl -sf -b $JAR $GW/v1/me | python3 -c 'import json,sys; print(json.load(sys.stdin)["uid"])')
KEY=$(scripts/gatehouse keys create-service docs --scopes profile:read,photo:read,admin,users:claims,api:github.com,api:microsoft.com,api:yahoo.com,tokens:github.com,tokens:microsoft.com | tail -1)
unset AUTH CB
"""


def problem_codes(output: str):
    """The `code` of every gateway problem document in the output, in order (one JSON document
    per line, as the gateway answers; `curl -i` headers around it are skipped)."""
    codes = []
    for line in output.splitlines():
        if "urn:gatehouse:problem:" not in line or "{" not in line:
            continue
        text = line[line.index("{"):line.rindex("}") + 1]
        try:
            document = json.loads(text)
            codes.append(document["code"] if isinstance(document, dict) and "code" in document else "<no code>")
        except (ValueError, KeyError):
            codes.extend(CODE.findall(line) or ["<unparsable problem>"])
    return sorted(codes)


def blocks(document: pathlib.Path):
    """(marker, text) of each shell block, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in BLOCK.finditer(document.read_text(encoding="utf-8"))]


def test_every_shell_block_says_whether_it_runs():
    missing = []
    for document in DOCUMENTS:
        for index, (marker, text) in enumerate(blocks(document), 1):
            if not MARKER.fullmatch(marker):
                missing.append(f"{document.relative_to(ROOT)} block {index} ({text.splitlines()[0][:60]}): no <!-- run: … --> line before it")
    assert not missing, "\n".join(missing)


class Demo:
    """`gatehouse demo` on ports it binds, with a data folder of its own."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="gatehouse-docs-")
        self.output = open(os.path.join(self.folder, "out"), "w+")
        # A session of its own, so that stopping it stops whatever scripts/demo is running.
        self.process = subprocess.Popen(
            ["bash", str(ROOT / "scripts/demo"), "--port", "0", "--emulator-port", "0", "--data-dir", self.data],
            stdout=self.output, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")},
        )
        self.urls = {}
        for _ in range(1800):
            self.output.seek(0)
            text = self.output.read()
            for label, key in (("Emulator at ", "emulator"), ("Operations (/metrics, /readyz) at ", "ops"), ("Gatehouse ready at ", "gateway")):
                found = re.search(re.escape(label) + r"(http://\S+)", text)
                if found:
                    self.urls[key] = found.group(1)
            if len(self.urls) == 3 or self.process.poll() is not None:
                break
            time.sleep(0.1)
        if len(self.urls) < 3:
            self.stop()
            raise AssertionError(f"the demo did not start:\n{text}")

    @property
    def data(self):
        return os.path.join(self.folder, "data")

    def stop(self):
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def localized(text: str, demo: Demo) -> str:
    """The block with the documents' fixed addresses replaced by the demo's."""
    for fixed, key in (("http://127.0.0.1:8080", "gateway"), ("http://127.0.0.1:8081", "emulator"), ("http://127.0.0.1:9090", "ops")):
        text = text.replace(fixed, demo.urls[key])
    return text


RUNNABLE = [d for d in DOCUMENTS if any(m.startswith("<!-- run: demo") for m, _ in blocks(d))]


@pytest.mark.parametrize("document", RUNNABLE, ids=[d.name for d in RUNNABLE])
def test_commands_run(document):
    demo = Demo()
    try:
        ops_port = demo.urls["ops"].rsplit(":", 1)[1]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
        environment.update(GATEHOUSE_DATA_DIR=demo.data, GATEHOUSE_OPS_ADDRESS=f"127.0.0.1:{ops_port}", GW=demo.urls["gateway"])
        # curl's configuration for blocks that expect no error: an answer of 400 or above fails.
        strict_home = os.path.join(demo.folder, "curl-strict")
        os.makedirs(strict_home)
        with open(os.path.join(strict_home, ".curlrc"), "w") as f:
            f.write("fail-with-body\n")
        setup = subprocess.run(["bash", "-c", PREAMBLE + "declare -p JAR USER_ID KEY VERIFIER CHALLENGE"], cwd=ROOT, env=environment,
                               capture_output=True, text=True, timeout=120)
        assert setup.returncode == 0, f"the preamble failed:\n{setup.stdout}\n{setup.stderr}"
        state = setup.stdout
        known = {"JAR", "USER_ID", "KEY", "VERIFIER", "CHALLENGE"}
        for index, (marker, text) in enumerate(blocks(document), 1):
            match = MARKER.fullmatch(marker)
            if not match or not match.group(1).startswith("demo"):
                continue
            expected = sorted((match.group(2) or "").split())
            block_environment = dict(environment, CURL_HOME=strict_home) if not expected else environment
            # The variables a block sets carry to the next block, as in one terminal.
            known |= set(re.findall(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", text, re.M))
            names = sorted(known)
            script = f"{state}\n{localized(text, demo)}\necho {SEPARATOR}\ndeclare -p {' '.join(names)} 2>/dev/null || true\n"
            run = subprocess.run(["bash", "-c", "set -euo pipefail\nshopt -s inherit_errexit\n" + script], cwd=ROOT, env=block_environment,
                                 capture_output=True, text=True, errors="replace", timeout=300)
            where = f"{document.relative_to(ROOT)} block {index}"
            assert run.returncode == 0 and SEPARATOR in run.stdout, \
                f"{where} exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
            output, state = run.stdout.split(SEPARATOR + "\n", 1)
            shown = problem_codes(output)
            assert shown == expected, f"{where} answered problems {sorted(shown)}, the document names {sorted(expected)}:\n{output[-3000:]}"
    finally:
        demo.stop()
