"""The provider emulator against the providers' own descriptions: its answers for GitHub's
`/user`, `/user/emails` and `/user/repos` (with its `Link` header), Microsoft Graph's `/me`,
`/me/events` and `/me/messages` (with `@odata.nextLink`), both providers' error bodies, and the
generated OpenID answers (discovery, userinfo, ID-token claims) are validated with the PyPI
`jsonschema` library against schemas kept in `schemas/`:

- `github.json`: components trimmed from `github/rest-api-description`
  (`descriptions/api.github.com/api.github.com.yaml`), each with its JSON pointer;
- `graph.json`: components trimmed from `microsoftgraph/msgraph-metadata` (the OpenAPI
  description generated from `schemas/v1.0-Prod.csdl`), each with its JSON pointer;
- `openid.json`: OpenID Connect Discovery 1.0 §3 and Core 1.0 §5.1, written from the
  specifications' text (they publish no schema).

The descriptions are OpenAPI 3.0: `nullable: true` is turned into a `null` type and the
OpenAPI-only keywords are dropped before validation. A schema that does not forbid extra
members (`additionalProperties`) still requires every member it lists as required, which is
where an emulator that answers a few members of an object fails."""

import base64
import hashlib
import json
import pathlib
import re
import secrets
import select
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import jsonschema
import jwt
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EMULATOR = ROOT / ".build" / "debug" / "gatehouse-emulator"
SCHEMAS = pathlib.Path(__file__).resolve().parent / "schemas"
OPENAPI_ONLY = {"nullable", "discriminator", "readOnly", "writeOnly", "xml", "externalDocs", "example", "deprecated"}


def to_json_schema(node):
    """An OpenAPI 3.0 schema as JSON Schema (draft 2020-12): `nullable` becomes a `null`
    type (or a `null` branch), `x-*` and the OpenAPI-only keywords go."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: to_json_schema(value) for key, value in node.items() if key not in OPENAPI_ONLY and not key.startswith("x-")}
    if node.get("nullable") is True:
        if "type" in result:
            types = result["type"] if isinstance(result["type"], list) else [result["type"]]
            result["type"] = types + ["null"]
            if "enum" in result:
                result["enum"] = result["enum"] + [None]
        else:
            result = {"anyOf": [result, {"type": "null"}]}
    return result


def bases(schemas):
    """The components other components extend (`allOf: [{$ref: base}, …]`)."""
    return {
        part["$ref"].rsplit("/", 1)[1] for schema in schemas.values() for part in schema.get("allOf", []) if "$ref" in part}


def closed(schema):
    """`schema` with no members but its own (and the OData control information, `@odata.*`):
    the emulator may not answer a member the description does not have. Set on the most
    derived types only: a base type's closure would refuse its subtypes' members."""
    return {**schema, "patternProperties": {"^@odata\\.": {}}, "unevaluatedProperties": False}


def without_odata_type(node):
    """Drops `@odata.type` from every `required` list: OData's JSON format (§4.5.3) omits
    the type annotation wherever it is the declared type, so Graph answers rarely carry it,
    while the converted description lists it as required everywhere."""
    if isinstance(node, list):
        return [without_odata_type(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: without_odata_type(value) for key, value in node.items()}
    if isinstance(result.get("required"), list):
        result["required"] = [name for name in result["required"] if name != "@odata.type"]
    return result


def validator(document, name):
    """A validator of `document`'s component `name`, its `$ref`s resolved inside the document;
    for a provider's own description (`"closed": true`), every object type closed to the
    members the description lists."""
    schemas = {key: without_odata_type(to_json_schema(value)) for key, value in document["schemas"].items()}
    extended = bases(schemas)
    components = {
        key: closed(value) if document.get("closed") and key not in extended and (value.get("type") == "object" or "allOf" in value) else value
        for key, value in schemas.items()}
    root = {"components": {"schemas": components}, "$ref": f"#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(root, format_checker=jsonschema.FormatChecker())


def problems(document, name, instance):
    """Every validation error of `instance` against component `name`, as readable lines."""
    return [f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message[:300]}" for error in validator(document, name).iter_errors(instance)]


def load(name):
    return json.loads((SCHEMAS / name).read_text())


@pytest.fixture(scope="module")
def emulator():
    """A running `gatehouse-emulator` on a port of its own; its base URL."""
    process = subprocess.Popen([str(EMULATOR), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = None
    deadline = time.time() + 60
    while url is None and time.time() < deadline:
        # Bounded: a line that never comes fails the fixture instead of hanging the run.
        if not select.select([process.stdout], [], [], max(0, deadline - time.time()))[0]:
            break
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("Gatehouse emulator ready at "):
            url = line.split(" at ", 1)[1].strip()
    try:
        assert url, "the emulator did not start"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def call(url, method="GET", headers=None, data=None):
    """(status, headers, body bytes), redirects not followed, errors answered like successes."""
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def code_from(location):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    assert "code" in query, location
    return query["code"][0]


def github_token(base, login="octocat"):
    """A GitHub OAuth token of a seeded user with `user:email` and `repo`, through the emulator's authorize and token endpoints."""
    query = urllib.parse.urlencode({
        "client_id": "gatehouse-demo-github", "redirect_uri": "http://127.0.0.1/callback", "scope": "user:email repo", "state": "s", "login": login})
    status, headers, _ = call(f"{base}/github/login/oauth/authorize?{query}")
    assert status == 302, status
    body = urllib.parse.urlencode({
        "client_id": "gatehouse-demo-github", "client_secret": "gatehouse-demo-github-secret", "code": code_from(headers["Location"]),
        "redirect_uri": "http://127.0.0.1/callback"}).encode()
    status, _, answer = call(f"{base}/github/login/oauth/access_token", "POST", {"Accept": "application/json"}, body)
    assert status == 200, answer
    return json.loads(answer)["access_token"]


def microsoft_token(base, hint="AdeleV@contoso.example"):
    """A Graph access token of a seeded user with `User.Read Calendars.Read Mail.Read`, through the emulator's authorize and token endpoints (PKCE S256)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    scope = "openid profile email offline_access User.Read Calendars.Read Mail.Read"
    query = urllib.parse.urlencode({
        "client_id": "11112222-bbbb-3333-cccc-4444dddd5555", "redirect_uri": "http://127.0.0.1/callback", "response_type": "code",
        "scope": scope, "state": "s", "nonce": "n", "login_hint": hint, "code_challenge": challenge, "code_challenge_method": "S256"})
    status, headers, _ = call(f"{base}/microsoft/common/oauth2/v2.0/authorize?{query}")
    assert status in (302, 303), status
    body = urllib.parse.urlencode({
        "client_id": "11112222-bbbb-3333-cccc-4444dddd5555", "client_secret": "gatehouse-demo-microsoft-secret", "grant_type": "authorization_code",
        "code": code_from(headers["Location"]), "redirect_uri": "http://127.0.0.1/callback", "code_verifier": verifier, "scope": scope}).encode()
    status, _, answer = call(f"{base}/microsoft/common/oauth2/v2.0/token", "POST", {"Content-Type": "application/x-www-form-urlencoded"}, body)
    assert status == 200, answer
    return json.loads(answer)["access_token"]


GITHUB = load("github.json")
API_HEADERS = {"User-Agent": "gatehouse-conformance", "Accept": "application/vnd.github+json"}


def github_get(base, path, token):
    return call(f"{base}/github-api{path}", headers={**API_HEADERS, "Authorization": f"Bearer {token}"})


def test_github_user_is_a_private_user(emulator):
    status, _, body = github_get(emulator, "/user", github_token(emulator))
    assert status == 200
    # GET /user answers oneOf private-user / public-user, told apart by user_view_type.
    user = json.loads(body)
    assert user.get("user_view_type") == "private", "the authenticated user's view"
    assert problems(GITHUB, "private-user", user) == []


def test_github_user_emails_are_email_objects(emulator):
    status, _, body = github_get(emulator, "/user/emails", github_token(emulator))
    assert status == 200
    emails = json.loads(body)
    assert emails, "octocat has emails"
    for email in emails:
        assert problems(GITHUB, "email", email) == []


def test_github_user_repos_are_full_repository_objects_paged_by_link(emulator):
    token = github_token(emulator)
    status, headers, body = github_get(emulator, "/user/repos?per_page=10", token)
    assert status == 200
    repositories = json.loads(body)
    assert len(repositories) == 10
    for repository in repositories:
        assert problems(GITHUB, "repository", repository) == [], repository["full_name"]
    # RFC 8288 Link: next and last on the first page, prev and first on a later one.
    link = headers["Link"]
    assert 'rel="next"' in link and 'rel="last"' in link, link
    next_url = [part.split(">")[0].lstrip(" <") for part in link.split(",") if 'rel="next"' in part][0]
    path = urllib.parse.urlsplit(next_url)
    status, headers, body = github_get(emulator, path.path.removeprefix("/github-api") + "?" + path.query, token)
    assert status == 200 and 'rel="prev"' in headers["Link"] and 'rel="first"' in headers["Link"]
    assert {item["id"] for item in json.loads(body)}.isdisjoint({item["id"] for item in repositories})


def test_github_bad_credentials_is_a_basic_error(emulator):
    status, _, body = github_get(emulator, "/user", "gho_" + "0" * 36)
    assert status == 401
    error = json.loads(body)
    assert error["message"] == "Bad credentials"
    assert problems(GITHUB, "basic-error", error) == []


GRAPH = load("graph.json")


def graph_get(base, path, token):
    return call(f"{base}/graph/v1.0{path}", headers={"Authorization": f"Bearer {token}"})


def test_graph_me_is_a_user(emulator):
    status, _, body = graph_get(emulator, "/me", microsoft_token(emulator))
    assert status == 200
    assert problems(GRAPH, "microsoft.graph.user", json.loads(body)) == []


@pytest.mark.parametrize("collection, schema", [("events", "microsoft.graph.eventCollectionResponse"), ("messages", "microsoft.graph.messageCollectionResponse")])
def test_graph_collections_page_by_next_link(emulator, collection, schema):
    token = microsoft_token(emulator)
    status, _, body = graph_get(emulator, f"/me/{collection}", token)
    assert status == 200
    page = json.loads(body)
    assert len(page["value"]) == 10 and "@odata.nextLink" in page
    assert problems(GRAPH, schema, page) == []
    following = urllib.parse.urlsplit(page["@odata.nextLink"])
    status, _, body = graph_get(emulator, following.path.removeprefix("/graph/v1.0") + "?" + following.query, token)
    assert status == 200
    second = json.loads(body)
    assert problems(GRAPH, schema, second) == []
    assert {item["id"] for item in second["value"]}.isdisjoint({item["id"] for item in page["value"]})


def test_graph_errors_are_odata_errors(emulator):
    status, _, body = graph_get(emulator, "/me", "not-a-token")
    assert status == 401
    error = json.loads(body)
    assert error["error"]["code"] == "InvalidAuthenticationToken"
    # The one known difference between Graph and its description: the service writes
    # innerError.date without an offset ("2026-11-26T10:09:01", UTC), where the model says
    # Edm.DateTimeOffset. The emulator answers as the service does; the check adds the Z.
    date = error["error"]["innerError"]["date"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", date), date
    error["error"]["innerError"]["date"] = date + "Z"
    assert problems(GRAPH, "microsoft.graph.ODataErrors.ODataError", error) == []


OPENID = load("openid.json")
OPENID_ISSUERS = {
    # name: (issuer path, client id, secret, login hint)
    "oidc": ("/oidc", "gatehouse-demo-oidc", "gatehouse-demo-oidc-secret", "olive@oidc.example"),
    "yahoo": ("/yahoo", "dj0yJmk9Z2F0ZWhvdXNlLWRlbW8-", "gatehouse-demo-yahoo-secret", "yuki@yahoo.example"),
}


@pytest.mark.parametrize("path", ["/oidc", "/yahoo", "/microsoft/common/v2.0", "/microsoft/organizations/v2.0"])
def test_discovery_documents_are_provider_metadata(emulator, path):
    status, _, body = call(f"{emulator}{path}/.well-known/openid-configuration")
    assert status == 200
    metadata = json.loads(body)
    if path == "/yahoo":
        # Yahoo's one departure from §3, answered as Yahoo answers it: its ID tokens are
        # ES256 only, where the text says RS256 MUST be listed. The check adds it back.
        assert metadata["id_token_signing_alg_values_supported"] == ["ES256"]
        metadata["id_token_signing_alg_values_supported"] = ["ES256", "RS256"]
    assert problems(OPENID, "openid-provider-metadata", metadata) == []
    if not path.startswith("/microsoft"):
        # Discovery §4.3: the issuer is the URL the document was fetched under (Microsoft's
        # multi-tenant documents name a `{tenantid}` template instead).
        assert metadata["issuer"] == emulator + path


@pytest.mark.parametrize("name", sorted(OPENID_ISSUERS))
def test_userinfo_and_id_token_carry_standard_claims(emulator, name):
    path, client, secret, hint = OPENID_ISSUERS[name]
    metadata = json.loads(call(f"{emulator}{path}/.well-known/openid-configuration")[2])
    query = urllib.parse.urlencode({
        "client_id": client, "redirect_uri": "http://127.0.0.1/callback", "response_type": "code", "scope": "openid profile email",
        "state": "s", "nonce": "n-1", "login_hint": hint})
    status, headers, _ = call(f"{metadata['authorization_endpoint']}?{query}")
    assert status in (302, 303), status
    basic = base64.b64encode(f"{client}:{secret}".encode()).decode()
    form = urllib.parse.urlencode({"grant_type": "authorization_code", "code": code_from(headers["Location"]), "redirect_uri": "http://127.0.0.1/callback"}).encode()
    status, _, answer = call(metadata["token_endpoint"], "POST", {"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded"}, form)
    assert status == 200, answer
    tokens = json.loads(answer)
    # The ID token's signature is checked with PyJWT against the issuer's JWKS, then its claims against Core §2 / §5.1.
    jwks = jwt.PyJWKClient(metadata["jwks_uri"])
    key = jwks.get_signing_key_from_jwt(tokens["id_token"])
    claims = jwt.decode(tokens["id_token"], key.key, algorithms=metadata["id_token_signing_alg_values_supported"], audience=client, issuer=metadata["issuer"])
    assert claims["nonce"] == "n-1"
    assert problems(OPENID, "id-token", claims) == []
    status, _, body = call(metadata["userinfo_endpoint"], headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert status == 200
    userinfo = json.loads(body)
    assert userinfo["sub"] == claims["sub"]
    assert problems(OPENID, "standard-claims", userinfo) == []
