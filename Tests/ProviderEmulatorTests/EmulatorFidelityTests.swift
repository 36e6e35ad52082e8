import CurlClient
import Foundation
import ProviderEmulator
import Testing

/// Where the emulator must answer as the real providers do (providers.md), so that the gateway
/// cannot pass against it and fail against them: redirect URIs, token kinds, PKCE's default,
/// refresh tokens that outlive their use.
@Suite struct EmulatorFidelityTests {
    /// The callback the clients of `registeredClients` register.
    static let registered = "http://127.0.0.1:9/v1/auth/p/callback"

    /// The demo's clients with `registered` as their callback.
    static let registeredClients = EmulatorConfiguration(
        githubClients: [ClientRegistration(id: "gh", secret: "gh-secret", callbackURL: registered)],
        microsoftClients: [
            ClientRegistration(id: EmulatorConfiguration.demoMicrosoftClient.id, secret: "ms-secret", callbackURL: registered)
        ],
        oidcClients: ["oidc": [ClientRegistration(id: "op", secret: "op-secret", callbackURL: registered)]])

    /// `POST /oidc/token` with `form`, the demo client authenticated by HTTP Basic.
    static func oidcToken(_ base: String, _ http: CurlHTTPClient, form: String) async throws -> OutboundResponse {
        let client = EmulatorConfiguration.demoOIDCClient
        return try await http.execute(
            OutboundRequest(
                method: "POST", url: "\(base)/oidc/token",
                headers: [
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Authorization": "Basic " + Data("\(client.id):\(client.secret)".utf8).base64EncodedString(),
                ], body: Array(form.utf8)))
    }

    /// `text` percent-encoded for a query.
    static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }

    @Test(
        "a registered callback: the identity platform and an OpenID Provider take exactly it; GitHub its path or below (no dot segment), same scheme and host, its port or any of a loopback one; none takes a fragment"
    )
    func redirectURIsFollowEachProvidersRule() async throws {
        try await withEmulator(Self.registeredClients) { base, http in
            func microsoft(_ redirect: String) async throws -> Int {
                let url =
                    "\(base)/microsoft/common/oauth2/v2.0/authorize?client_id=\(EmulatorConfiguration.demoMicrosoftClient.id)&response_type=code&scope=openid&login_hint=AdeleV%40contoso.example&redirect_uri=\(Self.escape(redirect))"
                return try await http.execute(OutboundRequest(url: url)).status
            }
            func openID(_ redirect: String) async throws -> Int {
                let url =
                    "\(base)/oidc/authorize?client_id=op&response_type=code&scope=openid&login_hint=olive%40oidc.example&redirect_uri=\(Self.escape(redirect))"
                return try await http.execute(OutboundRequest(url: url)).status
            }
            func github(_ redirect: String?) async throws -> OutboundResponse {
                let url = "\(base)/github/login/oauth/authorize?client_id=gh&login=octocat&scope=read%3Auser"
                return try await http.execute(OutboundRequest(url: url + (redirect.map { "&redirect_uri=\(Self.escape($0))" } ?? "")))
            }
            let registered = Self.registered
            for provider in [microsoft, openID] {
                #expect(try await provider(registered) == 302)
                for other in [
                    "\(registered)/deeper", "\(registered)evil", "https://127.0.0.1:9/v1/auth/p/callback", "http://127.0.0.1:10/v1/auth/p/callback",
                    "http://127.0.0.1:9/v1/auth/q/callback", "\(registered)#fragment",
                ] {
                    #expect(try await provider(other) == 400, "\(other)")
                }
            }
            #expect(try await github(registered).status == 302)
            #expect(try await github("\(registered)/deeper").status == 302)
            #expect(try await github("http://127.0.0.1:10/v1/auth/p/callback").status == 302, "any port of a loopback callback")
            let omitted = try await github(nil)
            #expect(omitted.status == 302 && omitted.headers["location"]?.hasPrefix("\(registered)?code=") == true, "\(omitted.headers)")
            for other in [
                "\(registered)evil", "https://127.0.0.1:9/v1/auth/p/callback", "http://127.0.0.1:9/v1/auth/q/callback",
                "\(registered)#fragment", "\(registered)/../../q/callback", "\(registered)/%2E%2E/%2e%2e/q/callback",
                "\(registered)%2F..%2F..%2Fq",
            ] {
                #expect(try await github(other).status == 400, "\(other)")
            }
        }
    }

    @Test(
        "an OpenID Provider's refresh token only refreshes and its access token only calls; expire-tokens expires access tokens, so a refresh follows"
    )
    func openIDTokenKindsAreKeptApart() async throws {
        try await withEmulator { base, http in
            let tokens = try await OpenIDProviderEmulatorTests.tokens(
                base, http, prefix: "/oidc", authorize: "/authorize", token: "/token", client: EmulatorConfiguration.demoOIDCClient,
                hint: "olive@oidc.example"
            )
            .jsonObject()
            let access = try #require(tokens["access_token"] as? String)
            let refresh = try #require(tokens["refresh_token"] as? String)
            func userinfo(_ token: String) async throws -> Int {
                try await http.execute(OutboundRequest(url: "\(base)/oidc/userinfo", headers: ["Authorization": "Bearer \(token)"])).status
            }
            func refreshing(_ token: String) async throws -> OutboundResponse {
                try await Self.oidcToken(base, http, form: "grant_type=refresh_token&refresh_token=\(Self.escape(token))")
            }
            #expect(try await userinfo(access) == 200)
            #expect(try await userinfo(refresh) == 401)
            let byAccess = try await refreshing(access)
            #expect(byAccess.status == 400)
            #expect(try byAccess.jsonObject()["error"] as? String == "invalid_grant")
            _ = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/expire-tokens"))
            #expect(try await userinfo(access) == 401)
            let renewed = try await refreshing(refresh)
            #expect(renewed.status == 200, "\(renewed.bodyText)")
            #expect(try await userinfo(try #require(try renewed.jsonObject()["access_token"] as? String)) == 200)
        }
    }

    @Test("an OpenID Provider takes a code_challenge sent without its method as plain (RFC 7636 §4.3)")
    func pkceWithoutAMethodIsPlain() async throws {
        try await withEmulator { base, http in
            let client = EmulatorConfiguration.demoOIDCClient
            let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
            func redeem(challenge: String, verifier: String) async throws -> Int {
                let callback = Self.escape(OpenIDProviderEmulatorTests.callback)
                let authorize =
                    "\(base)/oidc/authorize?client_id=\(client.id)&response_type=code&scope=openid&login_hint=olive%40oidc.example&redirect_uri=\(callback)&code_challenge=\(challenge)"
                let code = try #require(try await http.execute(OutboundRequest(url: authorize)).locationQuery()["code"])
                return try await Self.oidcToken(
                    base, http, form: "grant_type=authorization_code&code=\(code)&redirect_uri=\(callback)&code_verifier=\(verifier)"
                ).status
            }
            let plain = try await redeem(challenge: verifier, verifier: verifier)
            #expect(plain == 200)
            let hashed = try await redeem(challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", verifier: verifier)
            #expect(hashed == 400)
        }
    }

    @Test("the identity platform's refresh token keeps working after it was used: a retry is not refused")
    func microsoftRefreshTokensOutliveTheirUse() async throws {
        try await withEmulator { base, http in
            let tokens = try await MicrosoftEmulatorTests.tokens(base, http, hint: "AdeleV@contoso.example", scope: "openid offline_access User.Read")
            let refresh = try #require(tokens["refresh_token"] as? String)
            func refreshing(_ token: String, client: String = EmulatorConfiguration.demoMicrosoftClient.id) async throws -> OutboundResponse {
                let body =
                    "client_id=\(client)&client_secret=\(Self.escape(EmulatorConfiguration.demoMicrosoftClient.secret))&grant_type=refresh_token&refresh_token=\(Self.escape(token))"
                return try await http.execute(
                    OutboundRequest(method: "POST", url: "\(base)/microsoft/common/oauth2/v2.0/token", body: Array(body.utf8)))
            }
            let first = try await refreshing(refresh)
            #expect(first.status == 200, "\(first.bodyText)")
            #expect(try first.jsonObject()["refresh_token"] as? String != nil)
            let again = try await refreshing(refresh)
            #expect(again.status == 200, "\(again.bodyText)")
        }
    }
}
