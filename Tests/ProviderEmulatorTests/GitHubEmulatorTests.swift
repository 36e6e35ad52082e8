import Crypto
import CurlClient
import Foundation
import ProviderEmulator
import Testing

/// The GitHub part of the emulator against reference/providers.md §4, over real HTTP.
@Suite struct GitHubEmulatorTests {
    static let client = EmulatorConfiguration.demoGitHubClient
    static let callback = "http://127.0.0.1:9/callback"
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    static func authorizeURL(
        _ base: String, login: String?, scope: String = "read:user user:email", extra: String = "", clientID: String = client.id
    ) -> String {
        let challenge = Data(SHA256.hash(data: Data(verifier.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        var url =
            "\(base)/github/login/oauth/authorize?client_id=\(clientID)&redirect_uri=\(callback.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        url += "&state=st4te&scope=\(scope.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        url += "&code_challenge=\(challenge)&code_challenge_method=S256"
        if let login { url += "&login=\(login)" }
        return url + extra
    }

    /// Authorizes `login` and returns the code.
    static func code(
        _ base: String, _ http: CurlHTTPClient, login: String = "octocat", scope: String = "read:user user:email", clientID: String = client.id
    ) async throws -> String {
        let response = try await http.execute(OutboundRequest(url: authorizeURL(base, login: login, scope: scope, clientID: clientID)))
        #expect(response.status == 302)
        let query = try response.locationQuery()
        #expect(query["state"] == "st4te")
        return try #require(query["code"])
    }

    static func tokenRequest(
        _ base: String, code: String, accept: String? = nil, secret: String = client.secret, verifier: String = verifier, clientID: String = client.id
    ) -> OutboundRequest {
        let body = [
            "client_id=\(clientID)", "client_secret=\(secret)", "code=\(code)", "code_verifier=\(verifier)",
            "redirect_uri=\(callback.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
        ].joined(separator: "&")
        var headers: OutboundHeaders = ["Content-Type": "application/x-www-form-urlencoded"]
        if let accept { headers.add("Accept", accept) }
        return OutboundRequest(method: "POST", url: "\(base)/github/login/oauth/access_token", headers: headers, body: Array(body.utf8))
    }

    /// A token for `login` with `scope`.
    static func token(_ base: String, _ http: CurlHTTPClient, login: String = "octocat", scope: String = "read:user user:email") async throws
        -> String
    {
        let code = try await code(base, http, login: login, scope: scope)
        let response = try await http.execute(tokenRequest(base, code: code, accept: "application/json"))
        return try #require(try response.jsonObject()["access_token"] as? String)
    }

    static func api(_ url: String, token: String?, userAgent: String? = "gatehouse-tests") -> OutboundRequest {
        var headers: OutboundHeaders = ["Accept": "application/vnd.github+json"]
        // An empty header value makes libcurl leave the header out entirely.
        headers.add("User-Agent", userAgent ?? "")
        if let token { headers.add("Authorization", "Bearer \(token)") }
        return OutboundRequest(url: url, headers: headers)
    }

    @Test("a GitHub App gets an 8-hour ghu_ token and a ghr_ refresh token; a refresh rotates both and spends the old ones; an OAuth app has none")
    func gitHubAppTokensExpireAndRefresh() async throws {
        try await withEmulator { base, http in
            let app = EmulatorConfiguration.demoGitHubAppClient
            let code = try await Self.code(base, http, clientID: app.id)
            let issued = try await http.execute(Self.tokenRequest(base, code: code, accept: "application/json", secret: app.secret, clientID: app.id))
                .jsonObject()
            let access = try #require(issued["access_token"] as? String)
            let refresh = try #require(issued["refresh_token"] as? String)
            #expect(access.hasPrefix("ghu_") && refresh.hasPrefix("ghr_"))
            #expect(issued["expires_in"] as? Int == 28800)
            #expect(issued["refresh_token_expires_in"] as? Int == 15_897_600)
            #expect(issued["scope"] as? String == "")

            func refreshRequest(_ token: String, secret: String = app.secret) -> OutboundRequest {
                let body = "client_id=\(app.id)&client_secret=\(secret)&grant_type=refresh_token&refresh_token=\(token)"
                return OutboundRequest(
                    method: "POST", url: "\(base)/github/login/oauth/access_token",
                    headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"], body: Array(body.utf8))
            }
            let wrongSecret = try await http.execute(refreshRequest(refresh, secret: "nope"))
            #expect(wrongSecret.status == 200)
            #expect(try wrongSecret.jsonObject()["error"] as? String == "incorrect_client_credentials")

            let rotated = try await http.execute(refreshRequest(refresh)).jsonObject()
            let newAccess = try #require(rotated["access_token"] as? String)
            #expect(newAccess.hasPrefix("ghu_") && newAccess != access)
            let holds = (rotated["refresh_token"] as? String).map { $0.hasPrefix("ghr_") && $0 != refresh } == true
            #expect(holds)
            #expect(try await http.execute(Self.api("\(base)/github-api/user", token: access)).status == 401, "the old access token stops working")
            #expect(try await http.execute(Self.api("\(base)/github-api/user", token: newAccess)).status == 200)

            let spent = try await http.execute(refreshRequest(refresh))
            #expect(spent.status == 200)
            #expect(try spent.jsonObject()["error"] as? String == "bad_refresh_token")

            // An OAuth app's token lasts and comes without a refresh token.
            let oauth = try await http.execute(Self.tokenRequest(base, code: try await Self.code(base, http), accept: "application/json"))
                .jsonObject()
            #expect(oauth["refresh_token"] == nil && oauth["expires_in"] == nil)
            #expect((oauth["access_token"] as? String)?.hasPrefix("gho_") == true)
        }
    }

    @Test func authorizeWithASeededLoginRedirectsStraightBack() async throws {
        try await withEmulator { base, http in
            let code = try await Self.code(base, http)
            #expect(code.count == 20)
        }
    }

    @Test func authorizeWithoutALoginShowsAPickerOfPlainLinks() async throws {
        try await withEmulator { base, http in
            let response = try await http.execute(OutboundRequest(url: Self.authorizeURL(base, login: nil)))
            #expect(response.status == 200)
            #expect(response.headers["content-type"]?.hasPrefix("text/html") == true)
            for login in ["octocat", "private-pat", "unverified-uma"] {
                #expect(response.bodyText.contains("id=\"user-\(login)\""))
            }
            #expect(response.bodyText.contains("id=\"deny\""))
            let forced = try await http.execute(OutboundRequest(url: Self.authorizeURL(base, login: "octocat", extra: "&prompt=select_account")))
            #expect(forced.status == 200)
        }
    }

    @Test func denyingAccessRedirectsWithAccessDenied() async throws {
        try await withEmulator { base, http in
            let response = try await http.execute(OutboundRequest(url: Self.authorizeURL(base, login: "octocat", extra: "&deny=1")))
            let query = try response.locationQuery()
            #expect(query["error"] == "access_denied")
            #expect(query["state"] == "st4te")
            #expect(query["code"] == nil)
        }
    }

    @Test func authorizeRefusesUnknownClientsForeignRedirectsAndPlainPKCE() async throws {
        try await withEmulator { base, http in
            let unknown = try await http.execute(OutboundRequest(url: "\(base)/github/login/oauth/authorize?client_id=nobody&redirect_uri=x"))
            #expect(unknown.status == 404)
            let foreign = Self.authorizeURL(base, login: "octocat").replacingOccurrences(
                of: "redirect_uri=http%3A%2F%2F127%2E0%2E0%2E1", with: "redirect_uri=http%3A%2F%2Fevil%2Eexample")
            #expect(foreign.contains("evil"))
            #expect(try await http.execute(OutboundRequest(url: foreign)).status == 400)
            let plain = Self.authorizeURL(base, login: "octocat").replacingOccurrences(
                of: "code_challenge_method=S256", with: "code_challenge_method=plain")
            #expect(try await http.execute(OutboundRequest(url: plain)).locationQuery()["error"] == "invalid_request")
        }
    }

    @Test func tokenAnswersAreFormEncodedByDefaultJSONOrXMLOnRequest() async throws {
        try await withEmulator { base, http in
            let form = try await http.execute(Self.tokenRequest(base, code: try await Self.code(base, http)))
            #expect(form.status == 200)
            #expect(form.headers["content-type"]?.hasPrefix("application/x-www-form-urlencoded") == true)
            let fields = Dictionary(
                uniqueKeysWithValues: form.bodyText.split(separator: "&").map { pair in
                    let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                    return (parts[0], parts.count > 1 ? parts[1].removingPercentEncoding ?? "" : "")
                })
            #expect(fields["access_token"]?.hasPrefix("gho_") == true)
            #expect(fields["token_type"] == "bearer")
            #expect(fields["scope"] == "read:user,user:email")

            let json = try await http.execute(Self.tokenRequest(base, code: try await Self.code(base, http), accept: "application/json"))
            #expect(json.headers["content-type"]?.hasPrefix("application/json") == true)
            #expect((try json.jsonObject()["access_token"] as? String)?.hasPrefix("gho_") == true)

            let xml = try await http.execute(Self.tokenRequest(base, code: try await Self.code(base, http), accept: "application/xml"))
            #expect(xml.headers["content-type"]?.hasPrefix("application/xml") == true)
            #expect(xml.bodyText.hasPrefix("<OAuth><access_token>gho_"))
        }
    }

    @Test func codesAreSingleUseAndErrorsComeWithStatus200() async throws {
        try await withEmulator { base, http in
            let code = try await Self.code(base, http)
            let wrongSecret = try await http.execute(Self.tokenRequest(base, code: code, accept: "application/json", secret: "wrong"))
            #expect(wrongSecret.status == 200)
            #expect(try wrongSecret.jsonObject()["error"] as? String == "incorrect_client_credentials")

            let wrongVerifier = try await http.execute(Self.tokenRequest(base, code: code, accept: "application/json", verifier: "x" + Self.verifier))
            #expect(wrongVerifier.status == 200)
            #expect(try wrongVerifier.jsonObject()["error"] as? String == "bad_verification_code")

            // A failed PKCE check consumed the code, as a redemption attempt does at GitHub.
            let second = try await http.execute(Self.tokenRequest(base, code: code, accept: "application/json"))
            #expect(try second.jsonObject()["error"] as? String == "bad_verification_code")

            let fresh = try await Self.code(base, http)
            #expect(try await http.execute(Self.tokenRequest(base, code: fresh, accept: "application/json")).jsonObject()["access_token"] != nil)
            let replay = try await http.execute(Self.tokenRequest(base, code: fresh, accept: "application/json"))
            #expect(try replay.jsonObject()["error"] as? String == "bad_verification_code")

            let mismatch = try await Self.code(base, http)
            var request = Self.tokenRequest(base, code: mismatch, accept: "application/json")
            request.body = Array(String(decoding: request.body!, as: UTF8.self).replacingOccurrences(of: "callback", with: "other").utf8)
            #expect(try await http.execute(request).jsonObject()["error"] as? String == "redirect_uri_mismatch")
        }
    }

    @Test func userNeedsAUserAgentAndAValidToken() async throws {
        try await withEmulator { base, http in
            let token = try await Self.token(base, http)
            let noAgent = try await http.execute(Self.api("\(base)/github-api/user", token: token, userAgent: nil))
            #expect(noAgent.status == 403)
            #expect(noAgent.bodyText.contains("User-Agent"))

            let badToken = try await http.execute(Self.api("\(base)/github-api/user", token: "gho_notissued"))
            #expect(badToken.status == 401)
            let problem = try badToken.jsonObject()
            #expect(problem["message"] as? String == "Bad credentials")
            #expect(problem["status"] as? String == "401")

            let user = try await http.execute(Self.api("\(base)/github-api/user", token: token))
            #expect(user.status == 200)
            let object = try user.jsonObject()
            #expect(object["login"] as? String == "octocat")
            #expect(object["id"] as? Int == 583231)
            #expect(Int(user.headers["x-ratelimit-limit"] ?? "") == 5000)
            #expect(Int(user.headers["x-ratelimit-used"] ?? "") ?? 0 >= 1)
            #expect(user.headers["x-ratelimit-remaining"] != nil && user.headers["x-ratelimit-reset"] != nil)
        }
    }

    @Test func privateEmailIsNullOnUserAndListedOnUserEmailsWithTheScope() async throws {
        try await withEmulator { base, http in
            let token = try await Self.token(base, http, login: "private-pat")
            let user = try await http.execute(Self.api("\(base)/github-api/user", token: token)).jsonObject()
            #expect(user["email"] is NSNull)
            let emails = try await http.execute(Self.api("\(base)/github-api/user/emails", token: token))
            let list = try #require(try JSONSerialization.jsonObject(with: Data(emails.body)) as? [[String: Any]])
            let holds = list.contains { $0["primary"] as? Bool == true && $0["verified"] as? Bool == true }
            #expect(holds)
            let holds2 = list.contains { $0["verified"] as? Bool == false }
            #expect(holds2)

            let narrow = try await Self.token(base, http, login: "private-pat", scope: "read:user")
            #expect(try await http.execute(Self.api("\(base)/github-api/user/emails", token: narrow)).status == 404)
        }
    }

    @Test func avatarsAreRealPNGImages() async throws {
        try await withEmulator { base, http in
            let response = try await http.execute(OutboundRequest(url: "\(base)/github-avatars/u/583231?v=4&s=64"))
            #expect(response.status == 200)
            #expect(response.headers["content-type"] == "image/png")
            #expect(Array(response.body.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
            // IHDR width and height (big-endian) follow the signature and chunk header.
            #expect(Array(response.body[16..<24]) == [0, 0, 0, 64, 0, 0, 0, 64])
            #expect(try await http.execute(OutboundRequest(url: "\(base)/github-avatars/u/1")).status == 404)
        }
    }
}
