import Crypto
import Foundation
import HTTPTypes
import Hummingbird

/// api.github.com under `/github-api` and avatars under `/github-avatars`
/// (reference/providers.md §4.3–4.6).
struct GitHubAPIRoutes {
    let state: EmulatorState
    let configuration: EmulatorConfiguration

    func register(on router: Router<BasicRequestContext>) {
        router.get("/github-api/user") { request, _ in
            await authenticated(request, acceptedScopes: "") { user, _, headers in
                Response.json(Self.userJSON(user, host: Self.host(of: request)), headers: headers)
            }
        }
        router.get("/github-api/user/emails") { request, _ in
            await authenticated(request, acceptedScopes: "user, user:email") { user, token, headers in
                guard token.scopes.contains("user") || token.scopes.contains("user:email") else {
                    // Without the scope GitHub hides the resource rather than refusing it.
                    return Response.json(
                        ["message": "Not Found", "documentation_url": "https://docs.github.com/rest/users/emails", "status": "404"],
                        status: .notFound, headers: headers)
                }
                let emails: [[String: Any]] = user.emails.map {
                    ["email": $0.email, "verified": $0.verified, "primary": $0.primary, "visibility": ($0.visibility as Any?) ?? NSNullValue.null]
                }
                return Response.json(emails, headers: headers)
            }
        }
        router.get("/github-avatars/u/:id") { request, context in
            let id = context.parameters.get("id", as: Int.self)
            guard let user = SeededUsers.github.first(where: { $0.id == id }) else {
                return Response.text("Not Found", status: .notFound)
            }
            let requested = request.formQuery["s"].flatMap(Int.init) ?? 460
            let size = min(max(requested, 1), 460)
            let png = AvatarImage.png(size: size, color: user.avatarColor)
            // GitHub's avatar host sends both validators.
            return Response(
                status: .ok,
                headers: [
                    .contentType: "image/png", .cacheControl: "max-age=300", .eTag: AvatarImage.entityTag(png),
                    .lastModified: "Mon, 02 Nov 2026 10:00:00 GMT",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: png)))
        }
        router.delete("/github-api/applications/:clientID/token") { request, context in
            await revoke(request, clientID: context.parameters.get("clientID") ?? "", wholeGrant: false)
        }
        router.delete("/github-api/applications/:clientID/grant") { request, context in
            await revoke(request, clientID: context.parameters.get("clientID") ?? "", wholeGrant: true)
        }
    }

    /// Runs `body` for a request with a valid token, answering GitHub's 403 (no `User-Agent`)
    /// and 401 (`Bad credentials`) otherwise. Every answer carries the rate-limit headers.
    func authenticated(
        _ request: Request, acceptedScopes: String,
        _ body: (GitHubSeedUser, IssuedToken, HTTPFields) async -> Response
    ) async -> Response {
        guard let agent = request.headers[.userAgent], !agent.isEmpty else {
            return Response.text(
                "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (http://developer.github.com/v3/#user-agent-required). Check https://developer.github.com for other possible causes.\n",
                status: .forbidden, contentType: "text/html; charset=utf-8")
        }
        let authorization = request.headers[.authorization] ?? ""
        let token = ["Bearer ", "bearer ", "token "].first(where: authorization.hasPrefix).map { String(authorization.dropFirst($0.count)) }
        var record: IssuedToken?
        if let token { record = await state.useToken(token) }
        var headers = Self.commonHeaders()
        guard let issued = record, !issued.expired, !issued.revoked,
            let user = SeededUsers.github.first(where: { $0.login == issued.login })
        else {
            Self.addRateLimit(&headers, used: 1, resetAt: Int(Date().timeIntervalSince1970) + 3600, limit: 60)
            return Response.json(
                ["message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"], status: .unauthorized,
                headers: headers)
        }
        Self.addRateLimit(&headers, used: issued.used, resetAt: issued.resetAt, limit: 5000)
        headers[HTTPField.Name("X-OAuth-Scopes")!] = issued.scopes.joined(separator: ", ")
        headers[HTTPField.Name("X-Accepted-OAuth-Scopes")!] = acceptedScopes
        if issued.used > 5000 {
            return Response.json(
                [
                    "message": "API rate limit exceeded for user ID \(user.id).",
                    "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting",
                ], status: .forbidden, headers: headers)
        }
        let response = await body(user, issued, headers)
        return await conditional(request, response, token: token ?? "", record: issued)
    }

    /// GitHub's validators on a `200` GET: a weak `ETag` of the body, and `304 Not Modified`
    /// (no body, the same headers, not counted against the rate limit, counted apart:
    /// `GET /_emulator/stats/not-modified`) when `If-None-Match` names it.
    private func conditional(_ request: Request, _ response: Response, token: String, record: IssuedToken) async -> Response {
        guard request.method == .get, response.status == .ok else { return response }
        var response = response
        let collector = BodyCollector()
        guard (try? await response.body.write(collector)) != nil else { return response }
        let bytes = Array(buffer: collector.buffer)
        let tag = "W/\"" + Hex.string(SHA256.hash(data: bytes).prefix(16)) + "\""
        response.headers[.eTag] = tag
        let offered = request.headers[.ifNoneMatch]?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        guard offered.contains(tag) || offered.contains("*") else {
            response.body = ResponseBody(byteBuffer: collector.buffer)
            return response
        }
        await state.refundUse(token)
        await state.countNotModified("GET \(request.uri.path)")
        var headers = response.headers
        headers[.contentType] = nil
        headers[.contentLength] = nil
        Self.addRateLimit(&headers, used: max(0, record.used - 1), resetAt: record.resetAt, limit: 5000)
        return Response(status: .notModified, headers: headers)
    }

    /// `DELETE /applications/{client_id}/token|grant` with Basic client auth and a JSON body.
    private func revoke(_ request: Request, clientID: String, wholeGrant: Bool) async -> Response {
        var request = request
        let expected =
            "Basic " + Data("\(clientID):\(configuration.githubClients.first { $0.id == clientID }?.secret ?? "\u{0}")".utf8).base64EncodedString()
        guard request.headers[.authorization] == expected else {
            return Response.json(["message": "Not Found", "documentation_url": "https://docs.github.com/rest"], status: .notFound)
        }
        let body = (try? await request.collectBody(upTo: 64 << 10)).map { Data(buffer: $0) } ?? Data()
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let token = object["access_token"] as? String,
            await state.token(token)?.clientID == clientID
        else {
            return Response.json(
                ["message": "Validation Failed", "documentation_url": "https://docs.github.com/rest"], status: .unprocessableContent)
        }
        _ = await state.revoke(token, wholeGrant: wholeGrant)
        return Response(status: .noContent)
    }

    static func userJSON(_ user: GitHubSeedUser, host: String) -> [String: Any] {
        let api = "https://api.github.com/users/\(user.login)"
        return [
            "login": user.login, "id": user.id, "node_id": Data("04:User\(user.id)".utf8).base64EncodedString(),
            "avatar_url": "http://\(host)/github-avatars/u/\(user.id)?v=4", "gravatar_id": "",
            "url": api, "html_url": "https://github.com/\(user.login)",
            "followers_url": "\(api)/followers", "following_url": "\(api)/following{/other_user}",
            "gists_url": "\(api)/gists{/gist_id}", "starred_url": "\(api)/starred{/owner}{/repo}",
            "subscriptions_url": "\(api)/subscriptions", "organizations_url": "\(api)/orgs", "repos_url": "\(api)/repos",
            "events_url": "\(api)/events{/privacy}", "received_events_url": "\(api)/received_events",
            "type": "User", "user_view_type": "private", "site_admin": false,
            "name": (user.name as Any?) ?? NSNullValue.null, "company": NSNullValue.null, "blog": "",
            "location": NSNullValue.null, "email": (user.publicEmail as Any?) ?? NSNullValue.null, "hireable": NSNullValue.null,
            "bio": NSNullValue.null, "twitter_username": NSNullValue.null,
            "public_repos": 2, "public_gists": 1, "followers": 20, "following": 0,
            "created_at": "2008-01-14T04:33:35Z", "updated_at": "2008-01-14T04:33:35Z",
            "private_gists": 81, "total_private_repos": 100, "owned_private_repos": 100,
            "disk_usage": 10000, "collaborators": 8, "two_factor_authentication": true,
            "plan": ["name": "Medium", "space": 400, "private_repos": 20, "collaborators": 0],
        ]
    }

    static func host(of request: Request) -> String {
        request.head.authority ?? "127.0.0.1"
    }

    static func commonHeaders() -> HTTPFields {
        var headers = HTTPFields()
        headers[HTTPField.Name("x-github-media-type")!] = "github.v3; format=json"
        headers[HTTPField.Name("x-github-request-id")!] = Randomness.hex(8).uppercased()
        headers[HTTPField.Name("X-GitHub-Api-Version-Selected")!] = "2022-11-28"
        return headers
    }

    static func addRateLimit(_ headers: inout HTTPFields, used: Int, resetAt: Int, limit: Int) {
        headers[HTTPField.Name("x-ratelimit-limit")!] = String(limit)
        headers[HTTPField.Name("x-ratelimit-remaining")!] = String(max(0, limit - used))
        headers[HTTPField.Name("x-ratelimit-used")!] = String(used)
        headers[HTTPField.Name("x-ratelimit-reset")!] = String(resetAt)
        headers[HTTPField.Name("x-ratelimit-resource")!] = "core"
    }
}
