"""Signs the demo's octocat in through the emulator (start → authorize → callback → result) and
prints `uid id_token session_cookie` for the signed-in schemathesis run (scripts/test)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Benchmarks"))
import bench  # noqa: E402  (the benchmark's sign-in helper: plain HTTP, no dependencies)

url = sys.argv[1].rstrip("/")
port = int(url.rsplit(":", 1)[1])
session, id_token, uid = bench.sign_in(port, url + "/")
print(uid, id_token, session)
