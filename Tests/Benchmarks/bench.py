#!/usr/bin/env python3
"""Gatehouse benchmark: the release build against nginx on the same upstream.

An upstream nginx serves fixtures at the providers' API paths — GitHub's /user, /user/emails
and /user/repos (2 KB), Graph's /v1.0/me and photo metadata, an OpenID provider's userinfo —,
avatar photos of 40 KB and 4 MB, and a /slow endpoint answering after 50 ms. Gatehouse
(`gatehouse serve`, release) signs users in through the emulator (`gatehouse-emulator`; the
generic OpenID provider is the emulator's issuer seen through the upstream, whose userinfo is
the fixture) and reads the APIs and photos from that upstream; the reference is a second nginx
doing `proxy_pass` to the same upstream (keep-alive, `proxy_buffers 8 64k`), or, for routes that
call nothing upstream, the same Gatehouse process's `/healthz`; the floor rows set the gateway
against bare Hummingbird routes built with its flags (`gatehouse-bench-floor`: `/healthz`, and the
2 KB answer passed through the gateway's libcurl client); the hook, webhook and task-stack
rows set another gateway (with a hook, with webhooks, with Swift's task-stack slabs off) against
the shipped one. Sign-in throughput comes from a load generator over libcurl
(`gatehouse-signin-load`, Tests/Benchmarks/SignInLoad) making complete sign-ins (start, the
emulator's authorize, callback, `POST /v1/auth/result`), measured against the goal of 500 per
second.

Load comes from `wrk`. Each scenario runs in alternating rounds (Gatehouse, then its
reference), each round starting once the machine is idle; the table shows medians over rounds
of requests per second, CPU microseconds per request (utime + stime from /proc, all threads),
p99 latency, and the median of the per-round ratios; each row adds the serving gateway's peak
RSS during the scenario (VmHWM, reset before it), its peak anonymous memory during its rounds
(/proc/PID/smaps_rollup, sampled) and its file-backed memory after them. A second table judges each goal of
the rows from the same run's figures ("met", "missed", or "not measured" when --only left its
row out). This is a benchmark, not a test: it prints numbers and verdicts, it asserts nothing.

    Tests/Benchmarks/run            # full: 5 rounds of 8 s per side and scenario
    Tests/Benchmarks/run --smoke    # 1 round of 2 s (5 s with 1,000 connections or more; CI prints the table, no thresholds)
"""

import argparse
import base64
import contextlib
import hashlib
import http.client
import json
import math
import os
import platform
import random
import resource
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import allocations as allocation_check  # Tests/Benchmarks/allocations.py: the malloc counts and their baseline

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TICKS = os.sysconf("SC_CLK_TCK")
GITHUB_CLIENT = ("gatehouse-demo-github", "gatehouse-demo-github-secret")  # the emulator's demo client
FEDERATED_ID = 583231
OIDC_USERS = 128  # the emulator's generated load users load-1 … load-128 at its generic issuer
MICROSOFT_USER = ("AdeleV@contoso.example", "87d349ed-44d7-43e1-9a83-5f2406dee5bd")
OIDC_CLIENT = ("gatehouse-demo-oidc", "gatehouse-demo-oidc-secret")
MICROSOFT_CLIENT = ("11112222-bbbb-3333-cccc-4444dddd5555", "gatehouse-demo-microsoft-secret")
SLOW_MS = 50
# The shortest smoke round of a scenario with 1,000 connections or more.
SMOKE_SECONDS_MANY = 5
# The rows that measure memory: each starts after one heap trim (--heap-trim-interval).
MEMORY_ROWS = ("many", "idle", "photo 4 MB")
ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"


HANDED_OUT = set()


def free_port():
    """A free port below the kernel's ephemeral range (which outgoing connections and port-0
    binds use), never the same twice: nginx cannot report a port it picked itself."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    for _ in range(1000):
        port = random.randrange(10000, max(low, 10001))
        if port in HANDED_OUT:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        HANDED_OUT.add(port)
        return port
    raise SystemExit("no free port below the ephemeral range")


def cpu_ticks(pids):
    """utime + stime of every process in `pids` (threads included), in clock ticks."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except FileNotFoundError:
            pass
    return total


def status_kb(pid, key):
    """A `VmHWM`/`VmRSS` line of /proc/PID/status, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def memory_split_mb(pid):
    """Resident memory of `pid` split as (anonymous, file-backed) MB, from /proc/PID/smaps_rollup.

    File-backed pages (the executable's code and data, shared libraries) are shared with the
    page cache and cost nothing per request; anonymous pages are the process's own.
    """
    values = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                values[parts[0][:-1]] = int(parts[1])
    anonymous = values.get("Anonymous", 0)
    return anonymous / 1024, (values.get("Rss", 0) - anonymous) / 1024


def reset_peak(pid):
    """Starts `pid`'s VmHWM over from its current RSS (clear_refs 5, Linux ≥ 4.0)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


class AnonymousPeak:
    """Samples a process's anonymous memory every 100 ms while in use; `peak_mb` is the highest.
    Both sides of a scenario run with a sampler, so its cost falls on both alike."""

    def __init__(self, pid):
        self.pid, self.peak_mb, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            try:
                self.peak_mb = max(self.peak_mb, memory_split_mb(self.pid)[0])
            except OSError:
                pass
            self._stop.wait(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, memory_split_mb(self.pid)[0])


def open_idle_connections(port, count, pid):
    """`count` keep-alive connections to 127.0.0.1:port, each having had one `/healthz`
    answered (so the server holds a live HTTP/1.1 connection for each), then left idle. A
    connection the server does not answer within 60 s raises SystemExit, saying how many were
    open and what the server process held then (for the gateway's row, that stops the run)."""
    held = []
    try:
        for _ in range(count):
            connection = socket.create_connection(("127.0.0.1", port), timeout=60)
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
            answer = b""
            while b'"status"' not in answer:
                chunk = connection.recv(4096)
                if not chunk:
                    raise SystemExit("the server closed an idle-test connection")
                answer += chunk
            held.append(connection)
    except OSError as error:
        descriptors = len(os.listdir(f"/proc/{pid}/fd")) if os.path.exists(f"/proc/{pid}/fd") else -1
        with open(f"/proc/{pid}/limits") as f:
            limit = next((line.split()[3] for line in f if line.startswith("Max open files")), "?")
        for connection in held:
            connection.close()
        raise SystemExit(f"idle connection {len(held) + 1} of {count} got no answer ({error}); the server held "
                         f"{descriptors} descriptors (limit {limit})")
    except BaseException:
        for connection in held:
            connection.close()
        raise
    return held


@contextlib.contextmanager
def idle_connections_held(port, pid, count, notes):
    """`count` idle keep-alive connections to the server `pid` on `port`, open for the `with`
    block; notes the anonymous memory, in KB, each connection cost the server."""
    before = memory_split_mb(pid)[0]
    held = open_idle_connections(port, count, pid)
    try:
        time.sleep(0.5)
        notes.append((memory_split_mb(pid)[0] - before) * 1024 / count)
        yield
    finally:
        for connection in held:
            connection.close()
        time.sleep(0.5)


def holding_idle_connections(side, port, pid, count, notes):
    """`side`, measured while `count` idle keep-alive connections are open (opened before each
    round and closed after it, outside the measured time); notes the anonymous memory, in KB,
    each connection cost."""
    return Side(side.run, side.pids, side.warm, lambda: idle_connections_held(port, pid, count, notes))


def children(pid):
    """The pids of `pid`'s child processes (nginx workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return found


def wait_idle(limit=15.0):
    """Waits (bounded) until the CPUs were at least 85 % idle over a quarter second."""
    deadline = time.time() + limit
    while time.time() < deadline:
        def sample():
            with open("/proc/stat") as f:
                values = [int(v) for v in f.readline().split()[1:]]
            return values[3] + values[4], sum(values)
        idle1, total1 = sample()
        time.sleep(0.25)
        idle2, total2 = sample()
        if total2 > total1 and (idle2 - idle1) / (total2 - total1) >= 0.85:
            return
    print("  (machine not idle after %ds; running anyway)" % limit, file=sys.stderr)


def request(port, method, path, headers=None, body=None):
    """One HTTP/1.1 request to 127.0.0.1:port; (status, headers, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, response.getheaders(), data


def wait_http(port, path, limit=30.0):
    """Polls (bounded) until GET path answers 200; the seconds it took."""
    start = time.time()
    while time.time() - start < limit:
        try:
            if request(port, "GET", path)[0] == 200:
                return time.time() - start
        except OSError:
            pass
        time.sleep(0.005)
    raise SystemExit(f"127.0.0.1:{port}{path} did not come up")


def wait_port(port, limit=30.0):
    """Polls (bounded) until something accepts connections on 127.0.0.1:port."""
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


def write_fixtures(folder, upstream_port):
    """The upstream's files: GitHub's /user, /user/emails and /user/repos (2 KB), avatars of 40 KB and 4 MB."""
    avatar = f"http://127.0.0.1:{upstream_port}/avatars/u/{FEDERATED_ID}?v=4"
    user = {
        "login": "octocat", "id": FEDERATED_ID, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "avatar_url": avatar,
        "html_url": "https://github.com/octocat", "type": "User", "name": "The Octocat", "company": "@github",
        "blog": "https://github.blog", "location": "San Francisco", "email": "octocat@github.com", "bio": None,
        "public_repos": 8, "followers": 9000, "following": 9, "created_at": "2011-01-25T18:44:36Z",
    }
    emails = [{"email": "octocat@github.com", "primary": True, "verified": True, "visibility": "public"}]
    os.makedirs(os.path.join(folder, "user"), exist_ok=True)
    os.makedirs(os.path.join(folder, "avatars", "u"), exist_ok=True)
    with open(os.path.join(folder, "user", "index.json"), "w") as f:
        json.dump(user, f)
    with open(os.path.join(folder, "user", "emails.json"), "w") as f:
        json.dump(emails, f)
    repos, index = [], 0
    while len(json.dumps(repos)) < 2048 - 160:
        index += 1
        repos.append({"id": 1000 + index, "name": f"repo-{index}", "full_name": f"octocat/repo-{index}", "private": False,
                      "html_url": f"https://github.com/octocat/repo-{index}"})
    with open(os.path.join(folder, "user", "repos.json"), "w") as f:
        json.dump(repos, f)
    # Graph's /me and photo metadata (the emulator's seeded Adele; the id must be her object id).
    os.makedirs(os.path.join(folder, "graph"), exist_ok=True)
    with open(os.path.join(folder, "graph", "me.json"), "w") as f:
        json.dump({"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users/$entity", "businessPhones": ["+1 425 555 0109"],
                   "displayName": "Adele Vance", "givenName": "Adele", "jobTitle": "Retail Manager", "mail": MICROSOFT_USER[0],
                   "mobilePhone": None, "officeLocation": "18/2111", "preferredLanguage": "en-US", "surname": "Vance",
                   "userPrincipalName": MICROSOFT_USER[0], "id": MICROSOFT_USER[1]}, f)
    with open(os.path.join(folder, "graph", "photo.json"), "w") as f:
        json.dump({"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users('me')/photo/$entity",
                   "@odata.mediaContentType": "image/jpeg", "@odata.mediaEtag": "W/\"1\"", "id": "648X648", "height": 648, "width": 648}, f)
    jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    with open(os.path.join(folder, "avatars", "u", str(FEDERATED_ID)), "wb") as f:
        f.write(jpeg + os.urandom(40 * 1024 - len(jpeg) - 2) + b"\xff\xd9")
    with open(os.path.join(folder, "avatars", "big.jpg"), "wb") as f:
        f.write(jpeg + os.urandom(4 * 1024 * 1024 - len(jpeg) - 2) + b"\xff\xd9")


NGINX_COMMON = """
{modules}
daemon off;
worker_processes {workers};
pid {folder}/{name}.pid;
error_log {folder}/{name}.error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}/{name}-body;
    proxy_temp_path {folder}/{name}-proxy;
    fastcgi_temp_path {folder}/{name}-fastcgi;
    uwsgi_temp_path {folder}/{name}-uwsgi;
    scgi_temp_path {folder}/{name}-scgi;
    keepalive_requests 1000000;
{body}
}}
"""

UPSTREAM = """
    map $http_authorization $load_subject {{ "~^Bearer at-(?<subject>load-[0-9]+)[.]" $subject; default ""; }}
    server {{
        listen 127.0.0.1:{port};
        root {fixtures};
        location = /user {{ default_type application/json; try_files /user/index.json =404; }}
        location = /user/emails {{ default_type application/json; try_files /user/emails.json =404; }}
        location = /user/repos {{ default_type application/json; try_files /user/repos.json =404; }}
        location /avatars/u/ {{
            default_type image/jpeg;
            # GitHub resizes with ?s=; the largest size the gateway asks for gets the 4 MB file.
            if ($arg_s = "648") {{ rewrite ^ /avatars/big.jpg last; }}
        }}
        location = /avatars/big.jpg {{ default_type image/jpeg; }}
        # A slow API: every answer after {slow_ms} ms (nginx's echo module).
        location = /slow {{ default_type application/json; echo_sleep {slow_seconds}; echo '{{"slow": true}}'; }}
        # An app's before-sign-in hook answering in about a millisecond (the body is read and dropped).
        location = /hook {{ default_type application/json; echo_read_request_body; echo_sleep 0.001; echo '{{"decision":"allow"}}'; }}
        # A healthy webhook receiver: reads the delivery, answers 204.
        location = /webhook {{ echo_read_request_body; return 204; }}
        # The generic OpenID provider is the emulator's, seen through this server (its issuer
        # follows the Host header), except userinfo, answered here: the emulator's load users'
        # access tokens name their subject (at-load-N.…), so each user gets its own `sub`.
        location = /oidc/userinfo {{
            default_type application/json;
            echo '{{"sub":"$load_subject","name":"Load Tester","given_name":"Load","family_name":"Tester","email":"$load_subject@oidc.example","email_verified":true,"locale":"en-GB"}}';
        }}
        location /oidc/ {{ proxy_pass http://127.0.0.1:{emulator}; proxy_set_header Host $http_host; }}
        location = /v1.0/me {{ default_type application/json; try_files /graph/me.json =404; }}
        location = /v1.0/me/photo {{ default_type application/json; try_files /graph/photo.json =404; }}
        # Requests served so far: how many upstream calls a scenario's requests made.
        location = /_status {{ stub_status; }}
    }}
"""

REFERENCE = """
    upstream fixtures {{ server 127.0.0.1:{upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://fixtures;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffers 8 64k;
        }}
    }}
"""


def start_nginx(folder, name, body, workers, modules=""):
    """An nginx in the foreground with its own configuration; the process."""
    path = os.path.join(folder, name + ".conf")
    with open(path, "w") as f:
        f.write(NGINX_COMMON.format(folder=folder, name=name, body=body, workers=workers, modules=modules))
    return subprocess.Popen(["nginx", "-c", path, "-p", folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def sign_in(port, returning, provider="github.com", hint=("login", "octocat")):
    """A sign-in start → emulator → callback → result; (session cookie, ID token, uid)."""
    session, answer = sign_in_result(port, returning, provider, hint)
    return session, answer["idToken"], answer["user"]["uid"]


def sign_in_result(port, returning, provider="github.com", hint=("login", "octocat")):
    """The same sign-in; (session cookie, the whole `POST /v1/auth/result` answer)."""
    verifier = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode({"return_to": returning, "result_challenge": challenge, hint[0]: hint[1]})
    status, headers, _ = request(port, "GET", f"/v1/auth/{provider}/start?{query}")
    headers = dict((k.lower(), v) for k, v in headers)
    assert status == 302, status
    transaction = headers["set-cookie"].split(";")[0]
    authorize = urllib.parse.urlsplit(headers["location"])
    status, headers, _ = request(authorize.port, "GET", f"{authorize.path}?{authorize.query}")
    callback = urllib.parse.urlsplit(dict((k.lower(), v) for k, v in headers)["location"])
    status, headers, _ = request(port, "GET", f"{callback.path}?{callback.query}", {"Cookie": transaction})
    assert status == 303, status
    session = next(v.split(";")[0] for k, v in headers if k.lower() == "set-cookie" and "session=" in v)
    result = next(v for k, v in headers if k.lower() == "location").split("#gatehouse_result=")[1]
    body = json.dumps({"result": result, "result_verifier": verifier})
    status, _, data = request(port, "POST", "/v1/auth/result", {"Content-Type": "application/json"}, body)
    assert status == 200, data
    return session, json.loads(data)


def run_wrk(port, path, headers, seconds, connections, script=None):
    """wrk -t2 against 127.0.0.1:port/path (a Lua script may make each request); (requests,
    requests/s, p99 ms, non-2xx)."""
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency"] + (["-s", script] if script else [])
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    output = subprocess.run(command + [f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, check=True).stdout
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", output)
    p99_ms = float(p99.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)] if p99 else float("nan")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return requests, rate, p99_ms, int(bad.group(1)) if bad else 0


class Side:
    """One side of a scenario: how a round runs (seconds, connections → requests, rate, p99 ms)
    and whose CPU it is charged to; `around` wraps each round outside what is measured."""

    def __init__(self, run, pids, warm, around=None):
        self.run, self.pids, self.warm = run, pids, warm
        self.around = around or contextlib.nullcontext


def rotating_cookies(folder, cookies):
    """A wrk script sending each request with the next of `cookies`, the two wrk threads taking
    alternate ones: one user's requests are 2 × len(cookies) / connections rounds apart, so
    they never overlap (no shared fetch)."""
    path = os.path.join(folder, "rotate.lua")
    with open(path, "w") as f:
        f.write("cookies = {" + ",".join(json.dumps(c) for c in cookies) + "}\n" + """
threads = 0
function setup(thread)
  thread:set("offset", threads)
  threads = threads + 1
end
n = 0
function request()
  n = n + 1
  return wrk.format(nil, nil, { ["Cookie"] = cookies[(offset + 2 * n) % #cookies + 1] })
end
""")
    return path


def wrk_side(port, path, headers, pids, script=None):
    """wrk against one URL; warmed up by one request that must answer 200."""
    def run(seconds, connections):
        requests, rate, p99, bad = run_wrk(port, path, headers, seconds, connections, script)
        if bad:
            raise SystemExit(f"{bad} answers to {path} were not 2xx/3xx")
        return requests, rate, p99

    def warm():
        status = request(port, "GET", path, headers)[0]
        if status != 200:
            raise SystemExit(f"warm-up of {path} answered {status}")
    return Side(run, pids, warm)


def sign_in_side(generator, gateway_url, pids):
    """Complete GitHub sign-ins from the load generator (Tests/Benchmarks/SignInLoad)."""
    def run(seconds, connections):
        output = subprocess.run([generator, "--gateway", gateway_url, "--concurrency", str(connections), "--seconds", str(seconds)],
                                capture_output=True, text=True, check=True).stdout
        result = json.loads(output.strip().splitlines()[-1])
        if result["failures"]:
            raise SystemExit(f"{result['failures']} sign-ins failed: {result['firstFailure']}")
        return result["signIns"], result["rate"], result["p99ms"]
    return Side(run, pids, lambda: run(1, 2))


def metric_lines(port, name):
    """The exposition lines of one metric on an operations listener."""
    return [line for line in request(port, "GET", "/metrics")[2].decode().splitlines() if line.startswith(name)]


def draining(side, ops_port, drains):
    """`side`, with the time its gateway's outbox takes to empty after each run noted in `drains`."""
    def run(seconds, connections):
        before = webhook_counts(ops_port)
        result = side.run(seconds, connections)
        drains.append(webhook_drain_seconds(ops_port, before))
        return result
    return Side(run, side.pids, side.warm)


def counter_total(port, name, containing=""):
    """The sum of a counter's series on an operations listener (those whose line holds `containing`)."""
    return sum(float(line.split()[-1]) for line in metric_lines(port, name + "{") if containing in line)


def webhook_counts(ops_port):
    """The events written and delivered so far (the one endpoint takes every type)."""
    return (counter_total(ops_port, "gatehouse_webhook_events_total"),
            counter_total(ops_port, "gatehouse_webhook_deliveries_total", 'outcome="delivered"'))


def webhook_drain_seconds(ops_port, before):
    """How long the outbox takes to empty after a run: until every event the run wrote is
    delivered (counted from `before`, the counts when it began). The queue-depth gauge counts
    every pending entry, so the gateway reads it at most every 5 s: it would measure that lag,
    not the delivery."""
    started = time.time()
    while time.time() - started < 30:
        written, delivered = webhook_counts(ops_port)
        if delivered - before[1] >= written - before[0]:
            break
        time.sleep(0.05)
    return time.time() - started


def webhook_delivery(ops_port):
    """The events delivered and the p99 of the time from commit to delivery (the upper bound of
    the histogram bucket that holds it)."""
    buckets = []
    for line in metric_lines(ops_port, "gatehouse_webhook_delivery_delay_seconds_bucket"):
        bound = line.split('le="')[1].split('"')[0]
        buckets.append((float("inf") if bound == "+Inf" else float(bound), float(line.split()[-1])))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0
    return total, next((bound for bound, count in buckets if total and count >= 0.99 * total), float("nan"))


def upstream_requests(port):
    """The upstream nginx's count of requests served (stub_status), this one included."""
    return int(request(port, "GET", "/_status")[2].split()[9])


def measure(side, seconds, connections, upstream_port):
    """One round of a side; rate, CPU µs per request, p99, upstream calls per request."""
    before, calls_before = cpu_ticks(side.pids()), upstream_requests(upstream_port)
    requests, rate, p99 = side.run(seconds, connections)
    after, calls_after = cpu_ticks(side.pids()), upstream_requests(upstream_port)
    # The second status request counts itself; the warm-up of nothing falls in between.
    return rate, (after - before) / TICKS / max(requests, 1) * 1e6, p99, (calls_after - calls_before - 1) / max(requests, 1)


def shown(value, digits, at_least):
    """`value` with `digits` decimals, rounded away from its goal (down for an "at least", up for
    an "at most"), so that a figure printed as on the goal's line is never one that missed it."""
    scale = 10 ** digits
    if not math.isfinite(value):
        return f"{value}"
    # Rounded to 9 places first: 0.07 * 100 is 7.000000000000001, whose ceiling is 8.
    rounded = (math.floor if at_least else math.ceil)(round(value * scale, 9)) / scale
    return f"{rounded:.{digits}f}"


class Goals:
    """The goals of the benchmark's rows, each judged from this run's figures: a row of the goals
    table is the goal, what the run measured and "met", "missed" or "not measured" (a scenario
    left out with --only). Ratios compare sides measured in the same run, so the machine's speed
    cancels out."""

    def __init__(self):
        self.rows = {}  # scenario key -> the row of the main table
        self.extras = {}  # figures printed below the table (memory per connection, webhook delays)

    def table(self, connections, many_connections, idle_connections):
        lines = []

        def goal(text, keys, judge):
            if any(key not in self.rows and key not in self.extras for key in keys):
                lines.append((text, "—", "not measured"))
                return
            measured, met = judge(*[self.rows.get(key, self.extras.get(key)) for key in keys])
            lines.append((text, measured, "met" if met else "missed"))

        def ratio(least):
            return lambda row: (f"{shown(row[9], 2, True)}×", row[9] >= least)

        # The same process's /healthz: the bound row's Gatehouse side, else the floor row's.
        healthz = "bound" if "bound" in self.rows else "floor"

        def proxied(row, floor):
            factor = row[2] / floor[2]
            return f"{row[2]:.0f} against {floor[2]:.0f} µs of CPU ({shown(factor, 2, False)}×)", factor <= 2.5

        def share_of(ceiling_key, rate):
            return rate / self.extras[ceiling_key]

        goal("the gateway's /healthz ≥ 0.9× a bare Hummingbird route (the stack's floor)", ["floor"],
             lambda row: (f"{shown(row[9], 2, True)}× ({row[2]:.0f} against {row[7]:.0f} µs of CPU)", row[9] >= 0.9))
        for key, what in [("oidc", "live OpenID profile (one userinfo call each)"),
                          ("passthrough", "API passthrough, 2 KB"),
                          ("github", "live GitHub profile (shared fetches)"),
                          ("microsoft", "live Microsoft profile (shared fetches)")]:
            goal(f"{what} ≤ 2.5× the same process's /healthz CPU per request", [key, healthz], proxied)
            if key == "passthrough" and all(row in self.rows for row in ("passthrough", healthz, "proxied floor", "floor")):
                # Beside it, the same multiple of the stack alone: the bare route's proxied call
                # against its own /healthz (the reference sides of the two floor rows).
                text, measured, verdict = lines[-1]
                bare = self.rows["proxied floor"][7] / self.rows["floor"][7]
                lines[-1] = (text, f"{measured}; the bare route through the same libcurl client: "
                                   f"{self.rows['proxied floor'][7]:.0f} against {self.rows['floor'][7]:.0f} µs "
                                   f"({shown(bare, 2, False)}×)", verdict)
        goal("256 calls to a 50 ms upstream ≥ 95 % of the ceiling, p99 within 5 ms of nginx's", ["slow"],
             lambda row: (f"{shown(100 * share_of('slow ceiling', row[1]), 1, True)} %, p99 {row[3]:.1f} against "
                          f"{row[8]:.1f} ms ({'+' if row[3] >= row[8] else ''}{shown(row[3] - row[8], 1, False)})",
                          share_of("slow ceiling", row[1]) >= 0.95 and row[3] - row[8] <= 5))
        goal("40 KB photo, cached, ≥ 0.8× nginx", ["photo cached"], ratio(0.8))
        goal("40 KB photo, uncached (?refresh=true; shared transfers) ≥ 0.6× nginx", ["photo"], ratio(0.6))
        goal(f"4 MB photo, {connections} callers (?refresh=true; shared transfers) ≥ 1× nginx, the gateway's peak RSS ≤ 96 MB",
             ["photo 4 MB"],
             lambda row: (f"{shown(row[9], 2, True)}×, {shown(row[10], 1, False)} MB", row[9] >= 1 and row[10] <= 96))
        # Beside it, what the same connections cost the bare Hummingbird route of the floor row
        # and the gateway with Swift's task-stack slabs off (not how it ships).
        beside = [f"{what}: {kb:.1f} KB" for what, kb in (("the bare Hummingbird route", self.extras.get("idle floor KB")),
                                                          ("task-stack slabs off", self.extras.get("idle unslabbed KB")))
                  if kb is not None and kb > 0]
        goal(f"{idle_connections:,} idle keep-alive connections ≤ 16 KB of anonymous memory each", ["idle KB"],
             lambda kb: (f"{shown(kb, 1, False)} KB" + (f" ({'; '.join(beside)})" if beside else ""), kb <= 16))
        goal(f"/v1/me beside {idle_connections:,} idle connections ≥ 0.9× its rate without them", ["idle"], ratio(0.9))
        goal(f"{many_connections:,} calls in flight to a 50 ms upstream ≥ 90 % of the ceiling", ["many"],
             lambda row: (f"{shown(100 * share_of('many ceiling', row[1]), 1, True)} % (nginx "
                          f"{shown(100 * share_of('many ceiling', row[6]), 1, True)} %)",
                          share_of("many ceiling", row[1]) >= 0.9))
        goal(f"{many_connections:,} calls in flight ≤ 64 KB of anonymous memory each", ["many KB"],
             lambda kb: (f"{shown(kb, 1, False)} KB", kb <= 64))
        goal("≥ 500 complete sign-ins per second (SQLite)", ["sign-ins"],
             lambda row: (f"{shown(row[1], 0, True)} per second", row[1] >= 500))
        goal("sign-ins with a ~1 ms blocking hook ≥ 0.8× without", ["hook"], ratio(0.8))
        goal("sign-ins with webhooks ≥ 0.9× without", ["webhooks"], ratio(0.9))
        goal("webhooks: the outbox empty ≤ 2 s after a burst", ["drain"],
             lambda seconds: (f"{shown(seconds, 1, False)} s", seconds <= 2))
        goal("webhooks: p99 from commit to delivery ≤ 1 s", ["delivery p99"],
             lambda p99: (f"≤ {p99:g} s ({self.extras['delivered']:.0f} events)", p99 <= 1))

        def allocations(counts, baseline):
            # What allocations.py fails on fails here too: a benchmark missing from either side,
            # a count or a baseline of zero, a growth over the tolerance.
            names = sorted(set(counts) | set(baseline))
            unmatched = [name for name in names if not counts.get(name) or not baseline.get(name)]
            if unmatched or not names:
                return f"not comparable: {', '.join(unmatched) or 'no counts'}", False
            growth = max(counts[name] / baseline[name] - 1 for name in names)
            listed = ", ".join(f"{name} {counts[name]:,} ({baseline[name]:,})" for name in names)
            return (f"{listed}; the largest growth {'+' if growth >= 0 else ''}{shown(100 * growth, 1, False)} %",
                    not any(allocation_check.over_tolerance(counts[name], baseline[name]) for name in names))
        goal("allocations: mallocs per request within +10 % of the committed baseline (in parentheses)",
             ["allocations", "allocation baseline"], allocations)
        return lines


def raise_descriptor_limit(needed):
    """The soft descriptor limit raised to the hard one, for 10,000 idle connections and wrk's
    1,000 (children inherit it); stops with the reason when even the hard limit is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    if target < needed:
        print(f"  (only {target} descriptors: the idle-connection row will stop; raise the hard limit with ulimit -Hn)",
              file=sys.stderr)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="one short round per scenario (CI)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"), help="folder of the release executables")
    parser.add_argument("--only", default="", help="run only the scenarios whose name contains this text (profiling one case)")
    parser.add_argument("--heap-trim-interval", type=int, default=5,
                        help="the gateways' GATEHOUSE_HEAP_TRIM_INTERVAL in seconds (30 in production): the rows that "
                             "measure memory wait one interval, so they start from the memory in use")
    parser.add_argument("--log-level", default="warning",
                        help="the gateway's log level: warning (default) writes no line per request, as the reference nginx "
                             "(access_log off); info, the production default, adds an access-log line per request")
    arguments = parser.parse_args()
    # A stopped run (kill, timeout) exits through the `finally` below like an interrupted one,
    # so its gateways, nginx and wrk do not outlive it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    raise_descriptor_limit(12_000)
    rounds, seconds = (1, 2) if arguments.smoke else (arguments.rounds, arguments.seconds)
    for tool in ["nginx", "wrk"]:
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (apt-get install -y nginx wrk)")
    if not os.path.exists(ECHO_MODULE):
        raise SystemExit(f"{ECHO_MODULE} is missing (apt-get install -y libnginx-mod-http-echo)")

    folder = tempfile.mkdtemp(prefix="gatehouse-bench-")
    os.chmod(folder, 0o755)  # nginx workers may run as another user
    processes = []
    try:
        upstream_port, reference_port, gateway_port, emulator_port = (free_port() for _ in range(4))
        write_fixtures(os.path.join(folder, "fixtures"), upstream_port)
        upstream = start_nginx(
            folder, "upstream",
            UPSTREAM.format(port=upstream_port, fixtures=folder + "/fixtures", emulator=emulator_port, slow_ms=SLOW_MS,
                            slow_seconds=SLOW_MS / 1000),
            1, modules=f"load_module {ECHO_MODULE};")
        reference = start_nginx(folder, "reference", REFERENCE.format(port=reference_port, upstream=upstream_port), 2)
        emulator = subprocess.Popen(
            [os.path.join(arguments.bin, "gatehouse-emulator"), "--port", str(emulator_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes += [upstream, reference, emulator]
        wait_http(upstream_port, "/user")
        wait_http(reference_port, "/user")
        wait_port(emulator_port)

        gateway_url = f"http://127.0.0.1:{gateway_port}"
        emulator_url = f"http://127.0.0.1:{emulator_port}"
        upstream_url = f"http://127.0.0.1:{upstream_port}"
        environment = dict(
            os.environ,
            GATEHOUSE_DEVELOPMENT="true", GATEHOUSE_PORT=str(gateway_port), GATEHOUSE_PUBLIC_URL=gateway_url,
            GATEHOUSE_DATA_DIR=os.path.join(folder, "data"), GATEHOUSE_LOG_LEVEL=arguments.log_level,
            GATEHOUSE_ENCRYPTION_KEY=base64.b64encode(os.urandom(32)).decode(),
            GATEHOUSE_RETURN_TO_ALLOWLIST=gateway_url + "/",
            GATEHOUSE_GITHUB_CLIENT_ID=GITHUB_CLIENT[0], GATEHOUSE_GITHUB_CLIENT_SECRET=GITHUB_CLIENT[1],
            GATEHOUSE_GITHUB_AUTHORIZE_URL=emulator_url + "/github/login/oauth/authorize",
            GATEHOUSE_GITHUB_TOKEN_URL=emulator_url + "/github/login/oauth/access_token",
            GATEHOUSE_GITHUB_API_URL=upstream_url,
            GATEHOUSE_GITHUB_AVATAR_URL_PREFIXES=upstream_url + "/avatars/",
            # Microsoft signs in at the emulator and reads Graph from the upstream's fixtures.
            GATEHOUSE_MICROSOFT_CLIENT_ID=MICROSOFT_CLIENT[0], GATEHOUSE_MICROSOFT_CLIENT_SECRET=MICROSOFT_CLIENT[1],
            GATEHOUSE_MICROSOFT_LOGIN_URL=emulator_url + "/microsoft", GATEHOUSE_MICROSOFT_GRAPH_URL=upstream_url,
            # A generic OpenID provider whose issuer is the emulator's, seen through the upstream.
            GATEHOUSE_OIDC_BENCH_ISSUER=upstream_url + "/oidc", GATEHOUSE_OIDC_BENCH_CLIENT_ID=OIDC_CLIENT[0],
            GATEHOUSE_OIDC_BENCH_CLIENT_SECRET=OIDC_CLIENT[1],
            GATEHOUSE_USER_RATE_LIMIT="0", GATEHOUSE_AUTH_RATE_LIMIT="0", GATEHOUSE_MAX_PHOTO_BYTES=str(8 << 20),
            GATEHOUSE_PHOTO_CACHE_BYTES=str(64 << 20), GATEHOUSE_SERVICE_RATE_LIMIT="0", GATEHOUSE_OPS_ADDRESS="127.0.0.1:0",
            GATEHOUSE_API_POLICY='{"github.com": {"allow": ["GET /user/repos", "GET /slow"]}}',
            # Sized for the 1,000-call row, as the Performance article advises: with the default
            # 256 cached connections, each call beyond 256 in flight opens and closes one.
            GATEHOUSE_UPSTREAM_CONNECTIONS="1100",
            # All 1,000 in flight at once whatever the host's descriptor limit (the default is
            # half of what that limit keeps for calls out, and a sixteenth of that per user),
            # outside the eighth kept for sign-ins, refreshes and hooks (1,100 for the rest).
            GATEHOUSE_UPSTREAM_CALLS="1257",
            # The passthrough rows' calls are all for one user.
            GATEHOUSE_UPSTREAM_CALLS_PER_USER="1257",
            # Freed memory goes back to the system within seconds, so a row that measures memory
            # starts from what is in use, not from what the allocator kept of the rows before it
            # (the idle connections would reuse that and seem to cost nothing).
            GATEHOUSE_HEAP_TRIM_INTERVAL=str(arguments.heap_trim_interval),
        )
        # A service key for the passthrough scenarios, in the store the gateway is about to open.
        service_key = subprocess.run(
            [os.path.join(arguments.bin, "gatehouse"), "keys", "create-service", "bench", "--scopes", "api:github.com"],
            env=environment, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        started = time.time()
        gateway = subprocess.Popen([os.path.join(arguments.bin, "gatehouse"), "serve"], env=environment,
                                   stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "gateway.err"), "w"))
        processes.append(gateway)
        wait_http(gateway_port, "/readyz")
        ready_ms = (time.time() - started) * 1000
        def variant(name, **settings):
            """The same gateway with `settings` added to its environment, on a port and in a
            data folder of its own, once ready: (process, port, url)."""
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            process = subprocess.Popen(
                [os.path.join(arguments.bin, "gatehouse"), "serve"],
                env=dict(environment, GATEHOUSE_PORT=str(port), GATEHOUSE_PUBLIC_URL=url,
                         GATEHOUSE_DATA_DIR=os.path.join(folder, f"data-{name}"), GATEHOUSE_RETURN_TO_ALLOWLIST=url + "/",
                         **settings),
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, f"{name}.err"), "w"))
            processes.append(process)
            wait_http(port, "/readyz")
            return process, port, url

        # With a before-sign-in hook on loopback.
        hooked, hooked_port, hooked_url = variant(
            "hooked", GATEHOUSE_HOOK_BEFORE_SIGN_IN_URL=upstream_url + "/hook",
            GATEHOUSE_HOOK_SECRETS="whsec_" + base64.b64encode(os.urandom(32)).decode())
        # Delivering every event to a webhook receiver on loopback.
        webhooked_ops = free_port()
        webhooked, webhooked_port, webhooked_url = variant(
            "webhooked", GATEHOUSE_OPS_ADDRESS=f"127.0.0.1:{webhooked_ops}", GATEHOUSE_WEBHOOK_BENCH_URL=upstream_url + "/webhook",
            GATEHOUSE_WEBHOOK_BENCH_SECRETS="whsec_" + base64.b64encode(os.urandom(32)).decode())
        # With Swift's task-stack slabs off: every async frame its own malloc, freed when its
        # function returns, so a connection's task keeps only the frames it is waiting in. Not
        # how Gatehouse ships: a row of its own measures the CPU that costs, and the
        # idle-connection goal prints the memory it saves.
        unslabbed, unslabbed_port, unslabbed_url = variant("unslabbed", SWIFT_DEBUG_ENABLE_TASK_SLAB_ALLOCATOR="0")
        # The floor: one bare Hummingbird route in a process of its own, the same release flags.
        floor_port = free_port()
        floor = subprocess.Popen([os.path.join(arguments.bin, "gatehouse-bench-floor"), str(floor_port)],
                                 stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "floor.err"), "w"))
        processes.append(floor)
        wait_http(floor_port, "/healthz")
        # The proxied floor: the same executable given the upstream, in a process of its own, so
        # that the libcurl client, its connections and the heap of its calls stay out of the
        # floor process whose idle connections the memory goal prints.
        proxied_floor_port = free_port()
        proxied_floor = subprocess.Popen(
            [os.path.join(arguments.bin, "gatehouse-bench-floor"), str(proxied_floor_port), upstream_url],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "proxied-floor.err"), "w"))
        processes.append(proxied_floor)
        wait_http(proxied_floor_port, "/healthz")
        session, id_token, uid = sign_in(gateway_port, gateway_url + "/")
        oidc_sessions = [sign_in(gateway_port, gateway_url + "/", "oidc.bench", ("login_hint", f"load-{n}@oidc.example"))[0]
                         for n in range(1, OIDC_USERS + 1)]
        unslabbed_session = sign_in(unslabbed_port, unslabbed_url + "/")[0]
        microsoft_session = sign_in(gateway_port, gateway_url + "/", "microsoft.com", ("login_hint", MICROSOFT_USER[0]))[0]
        time.sleep(0.5)
        idle_rss_mb = status_kb(gateway.pid, "VmRSS") / 1024
        idle_anonymous_mb, idle_file_mb = memory_split_mb(gateway.pid)

        def gateway_side(path, headers):
            return wrk_side(gateway_port, path, headers, lambda: [gateway.pid])

        def reference_side(path, headers=None):
            return wrk_side(reference_port, path, headers or {}, lambda: children(reference.pid) + [reference.pid])

        bearer = {"Authorization": f"Bearer {id_token}"}
        cookie = {"Cookie": session}
        service = {"Authorization": f"Bearer {service_key}"}
        avatar = f"/avatars/u/{FEDERATED_ID}?v=4"
        healthz = gateway_side("/healthz", {})
        slow_connections = 256
        drains = []
        # (name, Gatehouse, reference name, reference, connections or None for --connections)
        # Smoke mode (CI) holds 2,000 idle connections: the row's code runs, in seconds.
        many_connections, idle_connections, idle_costs = 1000, 2_000 if arguments.smoke else 10_000, []
        scenarios = [
            # The stack's floor (goal: the gateway's /healthz ≥ 0.9× it).
            ("floor", "floor: the gateway's /healthz against one bare Hummingbird route (goal ≥ 0.9×)", healthz,
             "bare Hummingbird route, same flags", wrk_side(floor_port, "/healthz", {}, lambda: [floor.pid]), None),
            ("me bearer", "GET /v1/me, bearer ID token", gateway_side("/v1/me", bearer), "same process /healthz", healthz, None),
            ("me cookie", "GET /v1/me, session cookie", gateway_side("/v1/me", cookie), "same process /healthz", healthz, None),
            ("slabs off", "GET /v1/me, session cookie, Swift's task-stack slabs off (SWIFT_DEBUG_ENABLE_TASK_SLAB_ALLOCATOR=0)",
             wrk_side(unslabbed_port, "/v1/me", {"Cookie": unslabbed_session}, lambda: [unslabbed.pid]),
             "the same as shipped (slabs on)", gateway_side("/v1/me", cookie), None),
            ("oidc", f"live OIDC profile, ?refresh=true ({OIDC_USERS} users in turn: one userinfo call each)",
             wrk_side(gateway_port, "/v1/me/providers/oidc.bench/profile?refresh=true", {"Cookie": oidc_sessions[0]}, lambda: [gateway.pid],
                      rotating_cookies(folder, oidc_sessions)),
             "nginx proxy_pass userinfo", reference_side("/oidc/userinfo", {"Authorization": "Bearer at-load-1.bench"}), None),
            ("microsoft", "live Microsoft profile, ?refresh=true (Graph /me + photo metadata; shared fetches)",
             gateway_side("/v1/me/providers/microsoft.com/profile?refresh=true", {"Cookie": microsoft_session}),
             "nginx proxy_pass /v1.0/me", reference_side("/v1.0/me"), None),
            ("github", "live GitHub profile, ?refresh=true (/user + /user/emails; shared fetches)",
             gateway_side("/v1/me/providers/github.com/profile?refresh=true", cookie), "nginx proxy_pass /user",
             reference_side("/user"), None),
            ("photo", "40 KB photo, ?refresh=true (shared transfers)", gateway_side("/v1/me/photo?refresh=true", cookie), "nginx proxy_pass",
             reference_side(avatar), None),
            ("photo cached", "40 KB photo, cached", gateway_side("/v1/me/photo", cookie), "nginx proxy_pass", reference_side(avatar), None),
            # Before the rows that open thousands of connections: the heap they leave behind
            # holds pages the trim cannot return (a few live allocations on each), which would
            # count in this row's peak RSS (106 MB after 2,000 idle connections, 81 MB for the row alone).
            ("photo 4 MB", "4 MB photo, ?refresh=true (shared transfers)", gateway_side("/v1/me/photo?size=648&refresh=true", cookie), "nginx proxy_pass",
             reference_side(avatar + "&s=648"), None),
            # What bounds every proxied row: the same process answering with no credential and no
            # upstream call at all, against nginx's proxied 2 KB answer (a proxied route's ratio
            # can only be lower: it adds a libcurl transfer and two thread hops to this).
            ("bound", "bound of the proxied rows: same process /healthz (no credential, nothing upstream)", healthz,
             "nginx proxy_pass /user/repos", reference_side("/user/repos"), None),
            ("passthrough", "GitHub API passthrough, 2 KB JSON (service key; one upstream call each)",
             gateway_side(f"/v1/users/{uid}/providers/github.com/api/user/repos", service),
             "nginx proxy_pass /user/repos", reference_side("/user/repos"), None),
            # The stack's own cost of a proxied call: the same 2 KB answer through one bare
            # Hummingbird route and the gateway's libcurl client, with nothing of the gateway's.
            ("proxied floor", "floor of the proxied rows: the 2 KB passthrough against one bare Hummingbird route passing the same answer through the same libcurl client",
             gateway_side(f"/v1/users/{uid}/providers/github.com/api/user/repos", service),
             "bare route + libcurl client, same flags", wrk_side(proxied_floor_port, "/proxy", {}, lambda: [proxied_floor.pid]), None),
            ("slow", f"API passthrough, {SLOW_MS} ms upstream, {slow_connections} connections (ceiling {slow_connections * 1000 // SLOW_MS} req/s)",
             gateway_side(f"/v1/users/{uid}/providers/github.com/api/slow", service), "nginx proxy_pass /slow",
             reference_side("/slow"), slow_connections),
            ("many", f"API passthrough, {SLOW_MS} ms upstream, {many_connections} connections (ceiling {many_connections * 1000 // SLOW_MS} req/s)",
             gateway_side(f"/v1/users/{uid}/providers/github.com/api/slow", service), "nginx proxy_pass /slow",
             reference_side("/slow"), many_connections),
            ("idle", f"GET /v1/me, session cookie, beside {idle_connections} idle keep-alive connections",
             holding_idle_connections(gateway_side("/v1/me", cookie), gateway_port, gateway.pid, idle_connections, idle_costs),
             "the same without them (goal ≥ 0.9×)", gateway_side("/v1/me", cookie), None),
            ("sign-ins", "complete GitHub sign-ins (start, authorize, callback, result; SQLite)",
             sign_in_side(os.path.join(arguments.bin, "gatehouse-signin-load"), gateway_url, lambda: [gateway.pid]),
             "goal: 500 sign-ins/s", None, None),
            # Goal: at least 0.8× the rate of the same sign-ins without a hook, measured alike.
            ("hook", "complete GitHub sign-ins with a before-sign-in hook (loopback, ~1 ms answer)",
             sign_in_side(os.path.join(arguments.bin, "gatehouse-signin-load"), hooked_url, lambda: [hooked.pid]),
             "the same without a hook (goal ≥ 0.8×)",
             sign_in_side(os.path.join(arguments.bin, "gatehouse-signin-load"), gateway_url, lambda: [gateway.pid]), None),
            # Goals: ≥ 0.9× the same sign-ins without webhooks; the queue empty within 2 s of the
            # end, p99 from commit to delivery ≤ 1 s (both printed below the table).
            ("webhooks", "complete GitHub sign-ins with webhooks (every event to a loopback receiver)",
             draining(sign_in_side(os.path.join(arguments.bin, "gatehouse-signin-load"), webhooked_url, lambda: [webhooked.pid]),
                      webhooked_ops, drains),
             "the same without webhooks (goal ≥ 0.9×)",
             sign_in_side(os.path.join(arguments.bin, "gatehouse-signin-load"), gateway_url, lambda: [gateway.pid]), None),
        ]
        scenarios = [scenario for scenario in scenarios if arguments.only in scenario[1]]
        # Each side answers once before it is measured (connections, caches, lazy setup).
        for _, _, side, _, reference_of, _ in scenarios:
            for each in (side, reference_of):
                if each:
                    each.warm()

        rows, ceilings, goals = [], [], Goals()
        for key, name, side, reference_name, reference_of, connections in scenarios:
            connections = connections or arguments.connections
            # wrk opens all its connections inside the round: on a loaded two-core machine a
            # 2-second smoke round with 1,000 of them completed no request at all.
            row_seconds = max(seconds, SMOKE_SECONDS_MANY) if arguments.smoke and connections >= 1000 else seconds
            results = {"g": [], "r": [], "ratio": []}
            # The process serving the Gatehouse side (the hooked or webhooked gateway in their rows).
            serving = side.pids()[0]
            if key in MEMORY_ROWS:
                time.sleep(arguments.heap_trim_interval + 1)
            reset_peak(serving)
            anonymous_start_mb, anonymous_peak_mb = memory_split_mb(serving)[0], 0.0
            for _ in range(rounds):
                with side.around():
                    wait_idle()
                    with AnonymousPeak(serving) as peak:
                        g = measure(side, row_seconds, connections, upstream_port)
                anonymous_peak_mb = max(anonymous_peak_mb, peak.peak_mb)
                results["g"].append(g)
                if reference_of:
                    wait_idle()
                    with AnonymousPeak(serving):
                        r = measure(reference_of, row_seconds, connections, upstream_port)
                else:  # a goal, not a process: 500 sign-ins per second
                    r = (500.0, float("nan"), float("nan"), float("nan"))
                results["r"].append(r)
                results["ratio"].append(g[0] / r[0] if r[0] else float("nan"))

            def median(side, index):
                return statistics.median(run[index] for run in results[side])
            # The serving gateway's memory for this scenario: its peak, and what stays resident
            # after it, anonymous (its own) and file-backed (code and libraries, shared).
            scenario_peak_mb = status_kb(serving, "VmHWM") / 1024
            file_mb = memory_split_mb(serving)[1]
            rows.append((name, median("g", 0), median("g", 1), median("g", 2), median("g", 3), reference_name,
                         median("r", 0), median("r", 1), median("r", 2), statistics.median(results["ratio"]),
                         scenario_peak_mb, anonymous_peak_mb, file_mb))
            goals.rows[key] = rows[-1]
            if key in ("slow", "many"):
                ceiling = connections * 1000 / SLOW_MS
                goals.extras[f"{key} ceiling"] = ceiling
                ceilings.append(f"{name.split(' (')[0]}: Gatehouse {median('g', 0) / ceiling:.0%} of the {ceiling:.0f} req/s "
                                f"ceiling, nginx {median('r', 0) / ceiling:.0%}.")
            if key == "many":
                goals.extras["many KB"] = (anonymous_peak_mb - anonymous_start_mb) * 1024 / many_connections
            if key == "idle" and idle_costs:
                # The largest round's growth: a round that starts before the heap trim has
                # returned what the round before it freed reuses that memory and grows less.
                goals.extras["idle KB"] = max(idle_costs)
                # Beside it, each measured once and printed, not judged (a failure leaves it out
                # and keeps the run): the framework's own cost for the same connections, the floor
                # row's bare Hummingbird route (it trims no heap; before these it served at most
                # the floor row's 32 connections, none when --only left that row out), and the
                # gateway with the task-stack slabs off (at most its own row's 32 before these).
                for extra, held_port, held_pid, what in (("idle floor KB", floor_port, floor.pid, "the bare route"),
                                               ("idle unslabbed KB", unslabbed_port, unslabbed.pid,
                                                "the gateway without task-stack slabs")):
                    costs = []
                    try:
                        with idle_connections_held(held_port, held_pid, idle_connections, costs):
                            pass
                        goals.extras[extra] = costs[0]
                    except (SystemExit, OSError) as failure:
                        print(f"  {what}: idle connections not measured: {failure!r}", file=sys.stderr)
            if key == "webhooks" and drains:
                goals.extras["drain"] = max(drains)
                goals.extras["delivered"], goals.extras["delivery p99"] = webhook_delivery(webhooked_ops)
            print(f"  done: {name}", file=sys.stderr)
        # The malloc counts of the in-process hot paths (gatehouse-bench-allocations, built by
        # Tests/Benchmarks/run), judged against the baseline scripts/test checks them against.
        allocations_binary = os.path.join(arguments.bin, allocation_check.PRODUCT)
        if arguments.only in "allocations" and os.path.exists(allocations_binary):
            try:
                goals.extras["allocations"] = allocation_check.run(allocations_binary)
                with open(allocation_check.BASELINE) as file:
                    goals.extras["allocation baseline"] = json.load(file)
            except (SystemExit, Exception) as failure:  # the goal stays "not measured"; the rows are kept
                print(f"  allocations not counted: {failure!r}", file=sys.stderr)
                goals.extras.pop("allocations", None)
                goals.extras.pop("allocation baseline", None)
        peak_rss_mb = max([idle_rss_mb] + [row[10] for row in rows])

        print()
        print(f"Gatehouse benchmark — {time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} CPUs, "
              f"{platform.platform()}; wrk -t2 -c{arguments.connections} unless a scenario says otherwise, {rounds} round(s) of "
              f"{seconds} s per side" + (f" ({SMOKE_SECONDS_MANY} s with 1,000 connections or more; smoke mode: numbers are indicative only)"
                                         if arguments.smoke else ""))
        print()
        print("| scenario | Gatehouse req/s | µs CPU/req | p99 ms | upstream calls/req | reference | reference req/s | µs CPU/req | p99 ms | ratio "
              "| peak RSS MB | peak anon MB | file MB |")
        print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            print(("| %s | %.0f | %.0f | %.1f | %.2f | %s | %.0f | %.0f | %.1f | %.2f× | %.0f | %.1f | %.1f |" % row).replace("| nan ", "| — "))
        print()
        for line in ceilings:
            print(line)
        print()
        if arguments.smoke:
            print("Smoke mode: one short round per side, so a verdict below says what this round measured, "
                  "not whether the goal holds (the full run's rounds do).")
            print()
        print("| goal | measured | |")
        print("|---|---|---|")
        for line in goals.table(arguments.connections, many_connections, idle_connections):
            print("| %s | %s | %s |" % line)
        print()
        print(f"Gatehouse: start → ready {ready_ms:.0f} ms; idle RSS {idle_rss_mb:.0f} MB ({idle_anonymous_mb:.1f} MB anonymous, "
              f"{idle_file_mb:.1f} MB file-backed); peak RSS {peak_rss_mb:.0f} MB over the whole run. Per row: the serving "
              f"gateway's peak RSS (VmHWM, reset before the scenario) and peak anonymous memory (sampled every 100 ms) during "
              f"its rounds, and its file-backed memory after them (the hook, webhook and task-stack rows: their own gateway).")
        print("Upstream calls/req: calls the upstream nginx served per Gatehouse request (below 1 where concurrent requests "
              "of the one signed-in user shared a fetch). Sign-ins: CPU of the gateway per sign-in (the emulator's not counted).")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup short
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
