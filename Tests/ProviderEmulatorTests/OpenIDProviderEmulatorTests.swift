import CurlClient
import Foundation
import JWTKit
import ProviderEmulator
import Testing

/// The emulated OpenID Providers (`/oidc`, `/yahoo`) against providers.md §3 and §6.
@Suite struct OpenIDProviderEmulatorTests {
    static let callback = "http://127.0.0.1:9/cb"

    /// Authorizes the seeded `hint` at `prefix` and redeems the code; returns the token answer.
    static func tokens(
        _ base: String, _ http: CurlHTTPClient, prefix: String, authorize: String, token: String, client: ClientRegistration, hint: String,
        scope: String = "openid profile email", basic: Bool = true
    ) async throws -> OutboundResponse {
        let query = [
            "client_id=\(client.id)", "redirect_uri=\(escape(callback))", "response_type=code", "scope=\(escape(scope))", "state=s1",
            "nonce=n1", "login_hint=\(escape(hint))",
        ].joined(separator: "&")
        let approved = try await http.execute(OutboundRequest(url: "\(base)\(prefix)\(authorize)?\(query)"))
        let code = try #require(try approved.locationQuery()["code"])
        var body = "grant_type=authorization_code&code=\(code)&redirect_uri=\(escape(callback))"
        var headers: OutboundHeaders = ["Content-Type": "application/x-www-form-urlencoded"]
        if basic {
            headers.add("Authorization", "Basic " + Data("\(client.id):\(client.secret)".utf8).base64EncodedString())
        } else {
            body += "&client_id=\(escape(client.id))&client_secret=\(escape(client.secret))"
        }
        return try await http.execute(OutboundRequest(method: "POST", url: "\(base)\(prefix)\(token)", headers: headers, body: Array(body.utf8)))
    }

    static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }

    static func yahooTokens(
        _ base: String, _ http: CurlHTTPClient, hint: String = "yuki@yahoo.example", scope: String = "openid profile email", basic: Bool = true
    )
        async throws -> OutboundResponse
    {
        try await tokens(
            base, http, prefix: "/yahoo", authorize: "/oauth2/request_auth", token: "/oauth2/get_token",
            client: EmulatorConfiguration.demoYahooClient, hint: hint, scope: scope, basic: basic)
    }

    @Test func discoveryDocumentsNameThemselvesAsIssuer() async throws {
        try await withEmulator { base, http in
            let generic = try await http.execute(OutboundRequest(url: "\(base)/oidc/.well-known/openid-configuration")).jsonObject()
            #expect(generic["issuer"] as? String == "\(base)/oidc")
            #expect(generic["authorization_response_iss_parameter_supported"] as? Bool == true)
            #expect(generic["id_token_signing_alg_values_supported"] as? [String] == ["RS256"])
            let yahoo = try await http.execute(OutboundRequest(url: "\(base)/yahoo/.well-known/openid-configuration")).jsonObject()
            #expect(yahoo["issuer"] as? String == "\(base)/yahoo")
            #expect(yahoo["token_endpoint"] as? String == "\(base)/yahoo/oauth2/get_token")
            #expect(yahoo["token_revocation_endpoint"] != nil)
            #expect(yahoo["id_token_signing_alg_values_supported"] as? [String] == ["ES256"])
        }
    }

    @Test func yahooIssuesES256IDTokensThatVerifyAgainstItsJWKS() async throws {
        try await withEmulator { base, http in
            for basic in [true, false] {
                let answer = try await Self.yahooTokens(base, http, basic: basic)
                #expect(answer.status == 200)
                let json = try answer.jsonObject()
                #expect(json["xoauth_yahoo_guid"] == nil)
                let idToken = try #require(json["id_token"] as? String)
                let jwks = try await http.execute(OutboundRequest(url: "\(base)/yahoo/openid/v1/certs"))
                let keys = try await JWTKeyCollection().add(jwksJSON: jwks.bodyText)
                let header = try #require(Data(base64Encoded: Self.padded(String(idToken.split(separator: ".")[0]))))
                #expect(String(decoding: header, as: UTF8.self).contains(#""alg":"ES256""#))
                let claims = try await keys.verify(idToken, as: ClaimsProbe.self)
                #expect(claims.sub == "UQIDWJNWVNQD4GXZ5NGMZUSTQ4")
                #expect(claims.iss == "\(base)/yahoo")
                #expect(claims.nonce == "n1")
                #expect(claims.aud == EmulatorConfiguration.demoYahooClient.id)
            }
        }
    }

    @Test func tokenErrorsUseEachProvidersVocabulary() async throws {
        try await withEmulator { base, http in
            let form = "grant_type=authorization_code&code=nope&redirect_uri=x"
            let yahooClient = EmulatorConfiguration.demoYahooClient
            let yahoo = try await http.execute(
                OutboundRequest(
                    method: "POST", url: "\(base)/yahoo/oauth2/get_token",
                    body: Array((form + "&client_id=\(Self.escape(yahooClient.id))&client_secret=\(yahooClient.secret)").utf8)))
            #expect(yahoo.status == 400)
            #expect(try yahoo.jsonObject()["error"] as? String == "INVALID_AUTHORIZATION_CODE")
            let oidcClient = EmulatorConfiguration.demoOIDCClient
            let generic = try await http.execute(
                OutboundRequest(
                    method: "POST", url: "\(base)/oidc/token",
                    body: Array((form + "&client_id=\(oidcClient.id)&client_secret=\(oidcClient.secret)").utf8)))
            #expect(try generic.jsonObject()["error"] as? String == "invalid_grant")
            let badClient = try await http.execute(
                OutboundRequest(
                    method: "POST", url: "\(base)/oidc/token", body: Array((form + "&client_id=\(oidcClient.id)&client_secret=wrong").utf8)))
            #expect(badClient.status == 401)
            #expect(badClient.headers["www-authenticate"]?.hasPrefix("Basic") == true)
            let empty = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/yahoo/oauth2/get_token", body: Array(form.utf8)))
            #expect(try empty.jsonObject()["error"] as? String == "INVALID_INPUT")
        }
    }

    @Test func codesAreSingleUse() async throws {
        try await withEmulator { base, http in
            let client = EmulatorConfiguration.demoOIDCClient
            let query =
                "client_id=\(client.id)&redirect_uri=\(Self.escape(Self.callback))&response_type=code&scope=openid&login_hint=olive%40oidc.example"
            let approved = try await http.execute(OutboundRequest(url: "\(base)/oidc/authorize?\(query)"))
            let location = try approved.locationQuery()
            #expect(location["iss"] == "\(base)/oidc")
            let code = try #require(location["code"])
            let body =
                "grant_type=authorization_code&code=\(code)&redirect_uri=\(Self.escape(Self.callback))&client_id=\(client.id)&client_secret=\(client.secret)"
            let first = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/oidc/token", body: Array(body.utf8)))
            #expect(first.status == 200)
            let second = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/oidc/token", body: Array(body.utf8)))
            #expect(second.status == 400)
            #expect(try second.jsonObject()["error"] as? String == "invalid_grant")
        }
    }

    @Test func userinfoFieldsFollowTheGrantedScopesAndBadTokensGet401WithWWWAuthenticate() async throws {
        try await withEmulator { base, http in
            let narrow = try await Self.yahooTokens(base, http, scope: "openid").jsonObject()
            let narrowToken = try #require(narrow["access_token"] as? String)
            let onlySub = try await http.execute(
                OutboundRequest(url: "\(base)/yahoo/openid/v1/userinfo", headers: ["Authorization": "Bearer \(narrowToken)"]))
            #expect(try onlySub.jsonObject().keys.sorted() == ["sub"])
            let wide = try await Self.yahooTokens(base, http).jsonObject()
            let wideToken = try #require(wide["access_token"] as? String)
            let full = try await http.execute(
                OutboundRequest(url: "\(base)/yahoo/openid/v1/userinfo", headers: ["Authorization": "Bearer \(wideToken)"])
            )
            .jsonObject()
            #expect(full["email"] as? String == "yuki@yahoo.example")
            #expect(full["email_verified"] as? Bool == true)
            #expect((full["picture"] as? String)?.hasPrefix("\(base)/yahoo/pictures/") == true)

            let bad = try await http.execute(OutboundRequest(url: "\(base)/yahoo/openid/v1/userinfo", headers: ["Authorization": "Bearer nope"]))
            #expect(bad.status == 401)
            #expect(bad.headers["www-authenticate"]?.contains(#"error="invalid_token""#) == true)
            _ = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/expire-tokens"))
            let expired = try await http.execute(
                OutboundRequest(url: "\(base)/yahoo/openid/v1/userinfo", headers: ["Authorization": "Bearer \(wideToken)"]))
            #expect(expired.status == 401)
        }
    }

    @Test("the generic issuer signs in generated load users (load-N@oidc.example) whose access tokens name their subject; Yahoo has none")
    func generatedLoadUsers() async throws {
        try await withEmulator { base, http in
            let answer = try await Self.tokens(
                base, http, prefix: "/oidc", authorize: "/authorize", token: "/token", client: EmulatorConfiguration.demoOIDCClient,
                hint: "load-7@oidc.example")
            let json = try answer.jsonObject()
            let access = try #require(json["access_token"] as? String)
            #expect(access.hasPrefix("at-load-7."))
            let info = try await http.execute(OutboundRequest(url: "\(base)/oidc/userinfo", headers: ["Authorization": "Bearer \(access)"]))
                .jsonObject()
            #expect(info["sub"] as? String == "load-7" && info["email"] as? String == "load-7@oidc.example")
            // Not a load user: a number out of range, a padded number, or at Yahoo.
            let cases = [
                ("/oidc/authorize", EmulatorConfiguration.demoOIDCClient, "load-0@oidc.example"),
                ("/oidc/authorize", EmulatorConfiguration.demoOIDCClient, "load-007@oidc.example"),
                ("/oidc/authorize", EmulatorConfiguration.demoOIDCClient, "load-100001@oidc.example"),
                ("/yahoo/oauth2/request_auth", EmulatorConfiguration.demoYahooClient, "load-7@oidc.example"),
            ]
            for (path, client, hint) in cases {
                let query = [
                    "client_id=\(client.id)", "redirect_uri=\(Self.escape(Self.callback))", "response_type=code", "scope=openid",
                    "login_hint=\(Self.escape(hint))",
                ].joined(separator: "&")
                let picker = try await http.execute(OutboundRequest(url: "\(base)\(path)?\(query)"))
                #expect(picker.status == 200 && picker.bodyText.contains("choose an account"), "\(path) \(hint)")
            }
        }
    }

    @Test func rotatingKeysReplacesEveryIssuersKey() async throws {
        try await withEmulator { base, http in
            func kid(_ path: String) async throws -> String {
                let jwks = try await http.execute(OutboundRequest(url: base + path)).jsonObject()
                return try #require((jwks["keys"] as? [[String: Any]])?.first?["kid"] as? String)
            }
            let before = (try await kid("/oidc/jwks"), try await kid("/yahoo/openid/v1/certs"))
            let rotated = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/rotate-keys"))
            #expect(rotated.status == 200)
            let after = (try await kid("/oidc/jwks"), try await kid("/yahoo/openid/v1/certs"))
            #expect(before.0 != after.0)
            #expect(before.1 != after.1)
            let keys = try await http.execute(OutboundRequest(url: "\(base)/oidc/jwks")).jsonObject()["keys"] as? [[String: Any]]
            #expect(keys?.count == 1)
        }
    }

    @Test func seededOpenIDUsersAreListedAndUnknownTamperModesRefused() async throws {
        try await withEmulator { base, http in
            let users = try #require(
                try JSONSerialization.jsonObject(with: Data(try await http.execute(OutboundRequest(url: "\(base)/_emulator/users")).body))
                    as? [[String: Any]])
            let holds = users.contains { $0["provider"] as? String == "yahoo.com" && ($0["traits"] as? [String])?.contains("verified-email") == true }
            #expect(holds)
            let holds2 = users.contains {
                $0["provider"] as? String == "oidc.emulator" && ($0["traits"] as? [String])?.contains("unverified-email") == true
            }
            #expect(holds2)
            let refused = try await http.execute(
                OutboundRequest(method: "POST", url: "\(base)/_emulator/oidc/tamper", body: Array(#"{"issuer": "oidc", "mode": "nonsense"}"#.utf8)))
            #expect(refused.status == 400)
        }
    }

    static func padded(_ text: String) -> String {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return base64
    }
}

/// The claims the emulator tests read back after jwt-kit verified the signature.
struct ClaimsProbe: JWTPayload {
    var iss: String
    var sub: String
    var aud: String
    var nonce: String?
    func verify(using algorithm: some JWTAlgorithm) throws {}
}
