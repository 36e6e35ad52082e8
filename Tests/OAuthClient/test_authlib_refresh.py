"""A standard OAuth 2.0 client (Authlib, from PyPI) refreshes against the gateway's token
endpoint as its discovery document describes it (RFC 6749 §6 in, §5.1 out, §5.2 errors).

Run by scripts/test against a live `gatehouse demo` (GATEHOUSE_URL)."""
import os
import sys

import pytest
import requests
from authlib.integrations.requests_client import OAuth2Session
from authlib.integrations.base_client.errors import OAuthError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Benchmarks"))
import bench  # noqa: E402  (the benchmark's plain-HTTP sign-in helper)

URL = os.environ.get("GATEHOUSE_URL", "").rstrip("/")


@pytest.fixture()
def signed_in():
    if not URL:
        pytest.skip("GATEHOUSE_URL is not set (scripts/test sets it)")
    _, answer = bench.sign_in_result(int(URL.rsplit(":", 1)[1]), URL + "/")
    return answer


def test_authlib_refreshes_and_calls_the_api(signed_in):
    discovery = requests.get(URL + "/.well-known/openid-configuration", timeout=10).json()
    assert "refresh_token" in discovery["grant_types_supported"]
    token_endpoint = discovery["token_endpoint"]
    old = signed_in["refreshToken"]
    client = OAuth2Session(
        client_id="authlib-test", token_endpoint=token_endpoint, token_endpoint_auth_method="none",
        token={"access_token": signed_in["idToken"], "refresh_token": old, "token_type": "Bearer", "expires_in": 3600})
    fresh = client.refresh_token(token_endpoint, refresh_token=old)
    assert fresh["token_type"] == "Bearer"
    assert fresh["refresh_token"] != old
    assert fresh["access_token"] == fresh["id_token"]
    assert isinstance(fresh["expires_in"], int) and fresh["expires_in"] > 0
    # The client now sends the new access token: the gateway accepts it.
    me = client.get(URL + "/v1/me", timeout=10)
    assert me.status_code == 200, me.text
    assert me.json()["uid"] == signed_in["user"]["uid"]


def test_an_unknown_refresh_token_is_invalid_grant_and_another_grant_type_unsupported(signed_in):
    token_endpoint = URL + "/v1/token"
    client = OAuth2Session(client_id="authlib-test", token_endpoint=token_endpoint, token_endpoint_auth_method="none")
    with pytest.raises(OAuthError) as refused:
        client.refresh_token(token_endpoint, refresh_token="ghrt_" + "x" * 40)
    assert refused.value.error == "invalid_grant"
    answer = requests.post(token_endpoint, data={"grant_type": "password", "username": "u", "password": "p"}, timeout=10)
    assert answer.status_code == 400
    assert answer.json()["error"] == "unsupported_grant_type"
