import CurlClient
import Foundation
import Synchronization
import Testing

@testable import GatehouseCore

/// The passthrough's pure parts: API paths, templates, the policy's JSON form, paging links.
@Suite("Passthrough policy")
struct PassthroughPolicyTests {
    @Test(
        "paths decode their segments and refuse what could leave the API base",
        arguments: [
            "/user/../emails", "/user/%2e%2E/x", "/user/.", "/a%2Fb", "/a%5Cb", "//evil.example/x", "/https:/evil.example", "/a/%00", "/a/%0A",
            "/a/%7F", "/a/b%09c",
            "/a/%zz", "", "/", "/https%3A/x",
            // A slash, backslash or colon followed by a combining mark (U+0338) is still one.
            "/a/b%2F%CC%B8c", "/a/b%5C%CC%B8c", "/https:%CC%B8/x", "/https%3A%CC%B8/x",
            // Dot segments to a server that drops path parameters (`..;x` is `..` to Tomcat and
            // Jetty) or reads a run of dots as `..` (IIS).
            "/v1/items/..;/details", "/v1/items/%2e%2e%3bx/details", "/v1/items/.;x/y", "/v1/items/.../y", "/v1/items/;x/details",
        ])
    func refusedPaths(raw: String) {
        #expect(throws: GatehouseError.self) { try APIPath(raw: Substring(raw)) }
    }

    @Test("a valid path keeps Yahoo's matrix parameters and re-encodes what must be")
    func validPaths() throws {
        let yahoo = try APIPath(raw: "/fantasy/v2/users;use_login=1/games")
        #expect(yahoo.segments == ["fantasy", "v2", "users;use_login=1", "games"])
        #expect(yahoo.encoded == "/fantasy/v2/users;use_login=1/games")
        let spaced = try APIPath(raw: "v1.0/me/messages/AB%20C%3F")
        #expect(spaced.segments.last == "AB C?")
        #expect(spaced.encoded == "/v1.0/me/messages/AB%20C%3F")
        // Non-ASCII segments pass (none of their bytes is a control character) and go
        // upstream percent-encoded; a colon is refused in the first segment only.
        let accented = try APIPath(raw: "/drive/caf%C3%A9/a:b")
        #expect(accented.segments == ["drive", "café", "a:b"])
        #expect(accented.encoded == "/drive/caf%C3%A9/a:b")
    }

    @Test("a raw slash separates segments even before a combining mark, as the router splits the path")
    func slashesAreBytes() throws {
        // U+0301 after a raw `/` joins it in one `Character`; the router and
        // `ProviderAPIRoutes.apiPath(of:after:)` split by bytes, so the path must too.
        let marked = try APIPath(raw: "/repos/\u{301}x/y")
        #expect(marked.segments == ["repos", "\u{301}x", "y"])
        #expect(marked.encoded == "/repos/%CC%81x/y")
        let leading = try APIPath(raw: "/\u{301}x")
        #expect(leading.segments == ["\u{301}x"])
        // Two slashes are an empty segment, whatever follows them.
        #expect(throws: GatehouseError.self) { try APIPath(raw: "/a//\u{301}") }
    }

    @Test("templates match decoded segments by method; parameters match one segment without matrix parameters")
    func templates() throws {
        let template = try APITemplate("GET /v1.0/me/messages/{id}", scopes: ["Mail.Read"])
        #expect(template.description == "GET /v1.0/me/messages/{id}")
        #expect(template.matches(.get, try APIPath(raw: "/v1.0/me/messages/AAMk%3D")))
        #expect(!template.matches(.post, try APIPath(raw: "/v1.0/me/messages/x")))
        #expect(!template.matches(.get, try APIPath(raw: "/v1.0/me/messages/x/attachments")))
        #expect(!template.matches(.get, try APIPath(raw: "/v1.0/me/messages")))
        // Literal segments compare as bytes: U+037E (Greek question mark) is canonically the
        // same character as `;`, but not the same path to the provider.
        let yahoo = try APITemplate("GET /fantasy/v2/users;use_login=1/games")
        #expect(yahoo.matches(.get, try APIPath(raw: "/fantasy/v2/users;use_login=1/games")))
        #expect(!yahoo.matches(.get, try APIPath(raw: "/fantasy/v2/users%CD%BEuse_login=1/games")))
        // A parameter stands for one value: a `;` in it (raw or `%3B`, decoded alike) would add
        // matrix parameters, Yahoo's `;out=` expansions among them, that the template does not list.
        let league = try APITemplate("GET /fantasy/v2/league/{league_key}/standings")
        #expect(league.matches(.get, try APIPath(raw: "/fantasy/v2/league/nfl.l.12345/standings")))
        for expanded in ["nfl.l.1;out=transactions,draftresults", "nfl.l.1%3Bout=transactions", "nfl.l.1;"] {
            #expect(!league.matches(.get, try APIPath(raw: "/fantasy/v2/league/\(expanded)/standings")), "\(expanded)")
        }
        let accented = try APITemplate("GET /caf\u{E9}")
        #expect(!accented.matches(.get, try APIPath(raw: "/cafe%CC%81")))
        for bad in ["GET", "FETCH /x", "GET x", "GET /a//b", "GET /a/../b", "GET /a/%2F"] {
            #expect(throws: GatehouseError.self, "\(bad)") { try APITemplate(bad) }
        }
    }

    @Test("query rules: names compared decoded, without case or a leading $; expansions only where listed; a listed set takes nothing else")
    func queryRules() throws {
        let open = try APITemplate("GET /v1.0/me/messages/{id}")
        for query in ["$select=subject", "$top=1&$skip=2", "", "=x&&", "%24select=id", "$filter=a%3Bb"] {
            #expect(open.refusedParameter(in: query[...]) == nil, "\(query)")
        }
        #expect(open.refusedParameter(in: nil) == nil)
        for (query, name) in [
            ("$expand=attachments", "$expand"), ("%24EXPAND=x", "%24EXPAND"), ("Expand=x", "Expand"), ("$select=id;$expand=x", "$expand"),
            ("$ex%70and=x", "$ex%70and"), ("%20$expand=x", "%20$expand"), ("$expand+=x", "$expand+"), ("a=1&%FF=2", "%FF"),
            ("caf%C3%A9=1", "caf%C3%A9"),
            // Bracketed forms read as `expand` by Rack, PHP and `qs`; names a second decoding
            // would read otherwise; nothing left of a name.
            ("expand[]=x", "expand[]"), ("%24expand%5B0%5D=x", "%24expand%5B0%5D"), ("%2524expand=x", "%2524expand"),
            ("a%26%24expand=x", "a%26%24expand"), ("$=1", "$"), ("[x]=1", "[x]"),
        ] {
            #expect(open.refusedParameter(in: query[...]) == name[...], "\(query)")
        }
        let listed = try APITemplate("GET /v1.0/me/events", query: .only(["top", "skip"]))
        #expect(listed.refusedParameter(in: "$top=5&$SKIP=5&top=1&top[]=2"[...]) == nil)
        #expect(listed.refusedParameter(in: "$top=5&$filter=x"[...]) == "$filter")
        let any = try APITemplate("GET /v1.0/me/events", query: .any)
        #expect(any.refusedParameter(in: "$expand=x&%FF=1"[...]) == nil)
        // The policy picks the first template that takes the whole call, query included.
        let path = try APIPath(raw: "/v1.0/me/events")
        let provider = APIPolicy.Provider(allow: [listed, try APITemplate("GET /v1.0/me/events", scopes: ["x"], query: .any)])
        #expect(provider.template(for: .get, path, query: "$top=1")?.query == listed.query)
        #expect(provider.template(for: .get, path, query: "$expand=x")?.scopes == ["x"])
        #expect(APIPolicy.Provider(allow: [listed]).template(for: .get, path, query: "$expand=x") == nil)

        let policy = try APIPolicy(
            json: Data(
                #"{"microsoft.com": {"allow": [{"route": "GET /v1.0/me/events", "query": ["$Top", "%24skip"]}, {"route": "GET /v1.0/me", "query": ["*"]}, "GET /v1.0/me/photo"]}}"#
                    .utf8))
        #expect(policy.providers["microsoft.com"]?.allow.map(\.query) == [.only(["top", "skip"]), .any, .anyButExpansions])
        for bad in [
            #"["a=b"]"#, #"["a;b"]"#, #"["a%25b"]"#, #"["page[size]"]"#, #"["page%5Bsize%5D"]"#, #"["*", "$top"]"#, #"[""]"#, #"["$"]"#, #"["a b"]"#,
            #""$top""#, "[1]",
        ] {
            #expect(throws: GatehouseError.self, "\(bad)") {
                try APIPolicy(json: Data(#"{"microsoft.com": {"allow": [{"route": "GET /v1.0/me", "query": \#(bad)}]}}"#.utf8))
            }
        }
        // A paging link the caller could not follow is dropped.
        let links = PagingLinks(providerBase: "https://graph.microsoft.com", gatewayBase: "https://gw.example/api") {
            APIPolicy.Provider(allow: [listed]).template(for: .get, $0, query: $1) != nil
        }
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/me/events?$top=5&$skip=5") == "https://gw.example/api/v1.0/me/events?$top=5&$skip=5")
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/me/events?$top=5&$skiptoken=x") == nil)
    }

    @Test(
        "a byte budget: holds take what fits beside the others and within their owner's share, their group's and a group owner's; set aside ahead, an overdrawing hold reads past it; every hold gives it all back when it goes"
    )
    func byteBudget() {
        let seen = Mutex<[Int]>([])
        let budget = ByteBudget(limit: 200, ownerLimit: 60, groupLimit: 80, groupOwnerLimit: 50) { value in
            seen.withLock { $0.append(value) }
        }
        var first: ByteBudget.Hold? = ByteBudget.Hold(on: budget, owner: "key:a")
        let second = ByteBudget.Hold(on: budget, owner: "key:a")
        // An owner's share: 60 of the 200, however many holds it has.
        let owner = [first?.grow(by: 50) == true, !second.grow(by: 11), second.grow(by: 10), second.grow(by: 0)]
        #expect(owner == [true, true, true, true] && budget.inUse == 60)
        // A group owner's share (50), then the group's (80) while the budget still has room.
        let user = ByteBudget.Hold(on: budget, owner: "user:b", grouped: true)
        let otherUser = ByteBudget.Hold(on: budget, owner: "user:c", grouped: true)
        let thirdUser = ByteBudget.Hold(on: budget, owner: "user:d", grouped: true)
        let group = [user.grow(by: 50), !user.grow(by: 1), !otherUser.grow(by: 31), otherUser.grow(by: 30), !thirdUser.reserve(1)]
        #expect(group == [true, true, true, true, true] && budget.inUse == 140)
        // Set aside ahead, then read from what was set aside; past it only as the budget allows.
        let key = ByteBudget.Hold(on: budget, owner: "key:z")
        let ahead = [key.reserve(60), key.grow(by: 40), !key.grow(by: 30), key.bytes == 60]
        #expect(ahead == [true, true, true, true] && budget.inUse == 200)
        // A write's hold sets aside before the call (refused while nothing is left), then reads
        // its whole answer past that, overdrawing.
        var write: ByteBudget.Hold? = ByteBudget.Hold(on: budget, owner: "key:w", overdrawing: true)
        #expect(write?.reserve(1) == false)
        first = nil
        let overdrawn = [write?.reserve(10) == true, write?.grow(by: 100) == true, budget.inUse == 250]
        #expect(overdrawn == [true, true, true])
        write = nil
        #expect(budget.inUse == 150)
        let observed = seen.withLock { $0 }
        #expect(observed == [50, 60, 110, 140, 200, 150, 160, 250, 150])
    }

    @Test("the JSON policy: strings or objects with scopes, limits, unknown members refused by name")
    func policyJSON() throws {
        let policy = try APIPolicy(
            json: Data(
                #"{"github.com": {"allow": ["GET /user/repos", {"route": "POST /user/repos", "scopes": ["repo"]}], "signedInUsers": true, "maxRequestBytes": 2048}}"#
                    .utf8))
        let github = try #require(policy.providers["github.com"])
        #expect(github.allow.map(\.description) == ["GET /user/repos", "POST /user/repos"])
        #expect(github.allow[1].scopes == ["repo"] && github.signedInUsers && github.maxRequestBytes == 2048)
        #expect(github.maxResponseBytes == 8 << 20)
        do {
            _ = try APIPolicy(json: Data(#"{"github.com": {"allow": [], "signedInUser": true}}"#.utf8))
            Issue.record("an unknown member was accepted")
        } catch let error as GatehouseError {
            #expect(error.detail.contains("\"signedInUser\""))
        }
        #expect(throws: GatehouseError.self) { try APIPolicy(json: Data(#"{"github.com": {"allow": ["GET /x"], "maxRequestBytes": 0}}"#.utf8)) }
        #expect(throws: GatehouseError.self) { try APIPolicy(json: Data("[]".utf8)) }
        // A call's own timeout, in seconds; out of range or not a number is refused.
        let timed = try APIPolicy(json: Data(#"{"microsoft.com": {"allow": [], "timeoutSeconds": 2.5}}"#.utf8))
        #expect(timed.providers["microsoft.com"]?.timeout == .milliseconds(2500) && github.timeout == nil)
        for bad in ["0", "601", "true", "\"5\""] {
            #expect(throws: GatehouseError.self, "\(bad)") {
                try APIPolicy(json: Data(#"{"microsoft.com": {"allow": [], "timeoutSeconds": \#(bad)}}"#.utf8))
            }
        }
    }

    @Test("the configuration refuses a policy for an unconfigured provider or a generic provider without an API base")
    func configurationChecksThePolicy() throws {
        var configuration = GatewayConfiguration(
            publicURL: "https://gw.example", returnToAllowList: [], github: GitHubConfiguration(clientID: "c", clientSecret: "s"))
        configuration.api = APIPolicy(providers: ["microsoft.com": .init(allow: [])])
        #expect(throws: GatehouseError.self) { try configuration.validate() }
        configuration.api = APIPolicy(providers: ["github.com": .init(baseURL: "http://api.example", allow: [])])
        #expect(throws: GatehouseError.self) { try configuration.validate() }
        configuration.api = APIPolicy(providers: ["github.com": .init(allow: [])])
        try configuration.validate()
        // Graph's JSON answers are read whole: the answer budget must hold one.
        configuration.microsoft = MicrosoftConfiguration(clientID: "m", clientSecret: "s")
        configuration.apiBufferBytes = (8 << 20) - 1
        configuration.api = APIPolicy(providers: ["microsoft.com": .init(allow: [], maxResponseBytes: 2 << 20)])
        #expect(throws: GatehouseError.self) { try configuration.validate() }
        configuration.apiBufferBytes = 8 << 20
        try configuration.validate()
        #expect(configuration.memoryKept == configuration.photoCacheBytes + 16 << 20 + 64 << 20)
        // A budget meant as "no limit" is refused, not added up past `Int.max`.
        configuration.apiBufferBytes = Int.max
        #expect(throws: GatehouseError.self) { try configuration.validate() }
        #expect(configuration.memoryKept == Int.max)
        #expect(configuration.apiBaseURL(for: "github.com") == "https://api.github.com")
    }

    @Test("paging gaps: GET templates listing a page size without the parameter their paging links continue with, as names are read")
    func pagingGaps() throws {
        let policy = try APIPolicy(
            json: Data(
                #"""
                {"microsoft.com": {"allow": [
                   {"route": "GET /v1.0/me/messages", "query": ["$select", "$top"]},
                   {"route": "GET /v1.0/me/events", "query": ["%24TOP", "$SkipToken"]},
                   {"route": "GET /v1.0/me/people", "query": ["top", "skip"]},
                   {"route": "GET /v1.0/me/contacts", "query": ["$select"]},
                   {"route": "GET /v1.0/me/drive/root/children", "query": ["*"]},
                   "GET /v1.0/me/calendars",
                   {"route": "DELETE /v1.0/me/messages/{id}", "query": ["$top"]}]},
                 "github.com": {"allow": [
                   {"route": "GET /user/repos", "query": ["per_page", "Page"]},
                   {"route": "GET /user/issues", "query": ["PER_PAGE", "$top"]}]}}
                """#.utf8))
        let gaps = policy.pagingGaps.map { "\($0.providerId) \($0.route) \($0.missing)" }
        #expect(
            gaps == [
                "github.com GET /user/issues $skiptoken", "github.com GET /user/issues page", "microsoft.com GET /v1.0/me/messages $skiptoken",
            ])
    }

    @Test("dispatchers: POST templates that reach Graph's $batch or GitHub's GraphQL, through a parameter or in another case")
    func dispatchers() throws {
        let policy = try APIPolicy(
            json: Data(
                #"""
                {"microsoft.com": {"allow": [
                   "GET /v1.0/$batch", "POST /v1.0/me/events", "POST /v1.0/$batch", "POST /{version}/$BATCH", "POST /beta/{endpoint}",
                   "POST /v1.0/$batch/x"]},
                 "github.com": {"allow": ["GET /graphql", "POST /GraphQL", "POST /{any}", "POST /user/repos"]},
                 "yahoo.com": {"allow": ["POST /graphql"]}}
                """#.utf8))
        let found = policy.dispatchers.map { "\($0.providerId) \($0.route) → \($0.endpoint)" }
        #expect(
            found == [
                "github.com POST /GraphQL → POST /graphql", "github.com POST /{any} → POST /graphql",
                "microsoft.com POST /v1.0/$batch → POST /v1.0/$batch", "microsoft.com POST /{version}/$BATCH → POST /v1.0/$batch",
                "microsoft.com POST /{version}/$BATCH → POST /beta/$batch", "microsoft.com POST /beta/{endpoint} → POST /beta/$batch",
            ])
        #expect(APIPolicy.closed.dispatchers.isEmpty)
    }

    @Test("upload timeouts: providers allowing a body, each with the policy's timeout, else its upstream timeout")
    func uploadTimeouts() throws {
        var configuration = GatewayConfiguration(
            publicURL: "https://gw.example", returnToAllowList: [], github: GitHubConfiguration(clientID: "c", clientSecret: "s"))
        configuration.defaultUpstreamTimeout = .seconds(10)
        configuration.upstreamTimeouts = ["microsoft.com": .seconds(90)]
        configuration.api = APIPolicy(providers: [
            "github.com": .init(allow: [try APITemplate("GET /user/repos"), try APITemplate("POST /user/repos")]),
            "microsoft.com": .init(allow: [try APITemplate("PUT /v1.0/me/drive/items/{id}/content")]),
            "yahoo.com": .init(allow: [try APITemplate("GET /fantasy/v2/game/nfl"), try APITemplate("DELETE /x/{id}")], timeout: .seconds(600)),
            "oidc.example": .init(baseURL: "https://api.example", allow: [try APITemplate("PATCH /items/{id}")], timeout: .milliseconds(2500)),
        ])
        let timeouts = configuration.uploadTimeouts
        #expect(timeouts.map(\.providerId) == ["github.com", "microsoft.com", "oidc.example"])
        #expect(timeouts.map(\.timeout) == [.seconds(10), .seconds(90), .milliseconds(2500)])
        configuration.api = .closed
        #expect(configuration.uploadTimeouts.isEmpty)
    }

    @Test(
        "paging links move under the gateway only when they point at an allowed path under the provider's API base; every other link is dropped"
    )
    func pagingLinks() {
        let links = PagingLinks(providerBase: "https://graph.microsoft.com", gatewayBase: "https://gw.example/v1/me/providers/microsoft.com/api") {
            path, _ in
            path.segments.first == "v1.0"
        }
        #expect(
            links.rewrite("https://graph.microsoft.com/v1.0/me/events?$skip=10")
                == "https://gw.example/v1/me/providers/microsoft.com/api/v1.0/me/events?$skip=10")
        #expect(links.rewrite("https://graph.microsoft.com.evil.example/v1.0/me") == nil)
        #expect(links.rewrite("https://elsewhere.example/v1.0/me") == nil)
        // Outside the policy, dot segments, a fragment, a query that could end the link.
        #expect(links.rewrite("https://graph.microsoft.com/beta/me") == nil)
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/../../../v1/users/abc/providers/github.com/token") == nil)
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/%2E%2E/x") == nil)
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/me#x") == nil)
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/me?a=\"b") == nil)
        // A `#` or `?` followed by a combining mark is still one; raw non-ASCII is no URL.
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/me#\u{338}x") == nil)
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/me?\u{338}a=\"b") == nil)
        #expect(links.rewrite("https://graph.microsoft.com/v1.0/caf\u{E9}") == nil)
        // A link carrying a credential in its query (a provider that signs its paging links)
        // would hand it to whoever reads the answer, browsers included: dropped, in any case
        // or encoding of the name, behind a `;` (which some servers read as `&`), with a `$` or
        // `[]` as the policy reads names, or a name no parameter has once decoded; a name that
        // only contains one of them stays.
        for query in [
            "access_token=s", "page=2&ACCESS_TOKEN=s", "sig=s", "X-Amz-Signature=s", "access%5Ftoken=s", "api_key=s", "code=s",
            "page=2;access_token=s", "access_token[]=s", "$access_token=s", "page=2&%3Baccess_token=s",
        ] {
            #expect(links.rewrite("https://graph.microsoft.com/v1.0/me/events?\(query)") == nil, "\(query)")
        }
        #expect(
            links.rewrite("https://graph.microsoft.com/v1.0/me/delta?$deltatoken=abc")
                == "https://gw.example/v1/me/providers/microsoft.com/api/v1.0/me/delta?$deltatoken=abc")
        let header = links.rewriteLinkHeader(
            #"<https://graph.microsoft.com/v1.0/x?page=2>; rel="next", <https://evil.example/steal?x=1>; rel="last", <https://graph.microsoft.com/v1.0/y?a=1,2>; title="a, b"; rel="prev""#
        )
        #expect(
            header
                == #"<https://gw.example/v1/me/providers/microsoft.com/api/v1.0/x?page=2>; rel="next", <https://gw.example/v1/me/providers/microsoft.com/api/v1.0/y?a=1,2>; title="a, b"; rel="prev""#
        )
        #expect(links.rewriteLinkHeader(#"<https://evil.example/steal?x=1>; rel="next""#) == nil)
        // A second target smuggled among a good link's parameters drops that link.
        #expect(
            links.rewriteLinkHeader(#"<https://graph.microsoft.com/v1.0/x?page=3>; rel="last"; x=<http://evil.example/steal>; rel="next""#) == nil)
        // So does one whose `<` or `>` shares a character with the scalar before it (U+0600):
        // the header is read as bytes, as the caller's parser reads it; and non-ASCII among the
        // parameters drops the link too.
        #expect(
            links.rewriteLinkHeader(
                "<https://graph.microsoft.com/v1.0/x?page=1>; rel=\"prev\"; x=\u{600}<https://evil.example/steal\u{600}>; rel=\"next\"") == nil)
        #expect(links.rewriteLinkHeader("<https://graph.microsoft.com/v1.0/x?page=1>; rel=\"n\u{338}ext\"") == nil)
        // A comma joined to a combining mark still ends a link: the next one is read on its own.
        #expect(
            links.rewriteLinkHeader("<https://graph.microsoft.com/v1.0/x?page=1>; rel=\"prev\",\u{301}<https://evil.example/s>; rel=\"next\"")
                == #"<https://gw.example/v1/me/providers/microsoft.com/api/v1.0/x?page=1>; rel="prev""#)
        let body = Array(#"{"value": [1], "@odata.nextLink" : "https:\/\/graph.microsoft.com\/v1.0\/me\/events?$skip=10", "n": 1.50}"#.utf8)
        let rewritten = String(decoding: links.rewriteODataLinks(body) ?? [], as: UTF8.self)
        #expect(
            rewritten
                == #"{"value": [1], "@odata.nextLink" : "https://gw.example/v1/me/providers/microsoft.com/api/v1.0/me/events?$skip=10", "n": 1.50}"#)
        #expect(links.rewriteODataLinks(Array(#"{"value": []}"#.utf8)) == nil)
        // Another host's link becomes null; a member name inside a string value is text.
        let hostile = Array(#"{"s": "\"@odata.nextLink\": \"x\"", "@odata.deltaLink": "https://evil.example/d"}"#.utf8)
        #expect(
            String(decoding: links.rewriteODataLinks(hostile) ?? [], as: UTF8.self)
                == #"{"s": "\"@odata.nextLink\": \"x\"", "@odata.deltaLink": null}"#)
        // Member names are compared decoded (`\u004c` is `L`), and OData 4.01's short forms count.
        let escaped = Array(#"{"@odata.next\u004cink": "https://evil.example/steal", "@nextLink": "https://graph.microsoft.com/v1.0/me?p=2"}"#.utf8)
        #expect(
            String(decoding: links.rewriteODataLinks(escaped) ?? [], as: UTF8.self)
                == #"{"@odata.next\u004cink": null, "@nextLink": "https://gw.example/v1/me/providers/microsoft.com/api/v1.0/me?p=2"}"#)
        // An annotation on a property (the next page of an expanded collection) is a link too.
        let nested = Array(
            #"{"members@odata.nextLink": "https://evil.example/m", "attachments@odata.next\u004cink": "https://graph.microsoft.com/v1.0/me?p=3", "mail": "a@b.example"}"#
                .utf8)
        #expect(
            String(decoding: links.rewriteODataLinks(nested) ?? [], as: UTF8.self)
                == #"{"members@odata.nextLink": null, "attachments@odata.next\u004cink": "https://gw.example/v1/me/providers/microsoft.com/api/v1.0/me?p=3", "mail": "a@b.example"}"#
        )
    }

    @Test(
        "rewriting OData links is one pass with a cap: of 70,000 links in 7.5 MB the first 100 are rewritten, the rest dropped, the JSON still valid")
    func odataLinksAtScale() throws {
        let links = PagingLinks(providerBase: "https://graph.microsoft.com", gatewayBase: "https://gw.example/v1/me/providers/microsoft.com/api") {
            _, _ in true
        }
        func body(_ count: Int) -> [UInt8] {
            let item =
                #"{"id": "0123456789", "@odata.nextLink": "https:\/\/graph.microsoft.com\/v1.0\/me\/events?$skip=10&$top=10&x=0123456789012345678901234567890123456789"},"#
            return Array(("{\"value\": [" + String(repeating: item, count: count) + "{}]}").utf8)
        }
        let large = body(70_000)
        #expect(large.count > 7_000_000)
        let rewritten = try #require(links.rewriteODataLinks(large))
        let text = String(decoding: rewritten, as: UTF8.self)
        #expect(text.components(separatedBy: "https://gw.example/").count - 1 == PagingLinks.maximumRewrites)
        #expect(text.components(separatedBy: #""@odata.nextLink": null"#).count - 1 == 70_000 - PagingLinks.maximumRewrites)
        #expect(try JSONSerialization.jsonObject(with: Data(rewritten)) is [String: Any])
    }

    @Test("a provider's header passes by its name in lower case: the listed names and the rate-limit families, nothing else")
    func passedHeaders() {
        for name in ["ETag", "Link", "X-RateLimit-Remaining", "RateLimit-Policy", "x-ms-throttle-limit-percentage", "X-GitHub-Request-Id"] {
            #expect(ProviderAPIAnswer.passes(lowercasedName: OutboundHeaders.lowercasedName(name)), "\(name)")
        }
        for name in ["Set-Cookie", "Cache-Control", "Content-Length", "Content-Encoding", "Lin\u{212A}", "x-ratelimit", "Vary"] {
            #expect(!ProviderAPIAnswer.passes(lowercasedName: OutboundHeaders.lowercasedName(name)), "\(name)")
        }
    }
}
