import CurlClient
import Foundation
import GatehouseCore
import Testing

/// The code flow and the ID-token sign-in against `oidc-provider-mock`, configured as `oidc.mock`.
///
/// That provider ignores PKCE (it neither stores nor checks `code_challenge`), so these tests
/// cover interoperability, not PKCE: PKCE is verified by the emulator's tests and flows.
@Suite("Third-party OpenID Provider (oidc-provider-mock)")
struct ThirdPartyOIDCTests {
    static let client = (id: "gatehouse-e2e", secret: "gatehouse-e2e-secret")
    static let claims = #"{"sub": "alice", "email": "alice@mock.example", "email_verified": true, "name": "Alice Mock"}"#

    @Test("code flow: start → the provider's authorize form (POST sub=alice) → callback → result → /v1/me")
    func codeFlow() async throws {
        try await Self.withMock { mock, deployment, http in
            var browser = Browser(deployment)
            let start = try await browser.start("return_to=\(FormEncoding.escape(TestDeployment.returnTo))", provider: "oidc.mock")
            #expect(start.status == 302)
            let authorize = try #require(start.headers["location"])
            #expect(authorize.hasPrefix(mock.issuer))
            // The provider's own form: choosing the subject posts it back to the same URL.
            let approved = try await http.execute(
                OutboundRequest(
                    method: "POST", url: authorize, headers: ["Content-Type": "application/x-www-form-urlencoded"], body: Array("sub=alice".utf8)))
            #expect(approved.status == 302)
            let callback = try await browser.send(try #require(approved.headers["location"]))
            #expect(callback.status == 303)
            let id = String(try #require(callback.headers["location"]).split(separator: "=").last ?? "")
            let result = try await browser.result(id)
            #expect(result.status == 200, "\(result.bodyText)")
            let user = try #require(try jsonObject(result)["user"] as? [String: Any])
            #expect(user["email"] as? String == "alice@mock.example")
            #expect(user["emailVerified"] as? Bool == true)
            #expect((user["providers"] as? [[String: Any]])?.first?["federatedId"] as? String == "alice")
            let me = try await browser.send("\(deployment.gatewayURL)/v1/me")
            #expect(me.status == 200)
        }
    }

    @Test("ID-token sign-in with a token the third-party provider issued, nonce = SHA-256(rawNonce)")
    func idTokenSignIn() async throws {
        try await Self.withMock { mock, deployment, http in
            // Play the native app: run the provider's flow ourselves to get an ID token.
            let rawNonce = SecureRandom.token()
            let redirect = "http://127.0.0.1:9/app-callback"
            let query = FormEncoding.encode([
                ("client_id", Self.client.id), ("redirect_uri", redirect), ("response_type", "code"), ("scope", "openid email profile"),
                ("state", "app-state"), ("nonce", SecureRandom.digest(rawNonce)),
            ])
            let approved = try await http.execute(
                OutboundRequest(
                    method: "POST", url: "\(mock.issuer)/oauth2/authorize?\(query)", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Array("sub=alice".utf8)))
            let location = try #require(approved.headers["location"])
            let foundCode = URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value
            let code = try #require(foundCode)
            let basic = Data("\(Self.client.id):\(Self.client.secret)".utf8).base64EncodedString()
            let token = try await http.execute(
                OutboundRequest(
                    method: "POST", url: "\(mock.issuer)/oauth2/token",
                    headers: ["Content-Type": "application/x-www-form-urlencoded", "Authorization": "Basic \(basic)"],
                    body: Array(FormEncoding.encode([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect)]).utf8)))
            let idToken = try #require(try jsonObject(token)["id_token"] as? String)

            var browser = Browser(deployment)
            let signedIn = try await browser.send(
                "\(deployment.gatewayURL)/v1/auth/idtoken", method: "POST", headers: ["Content-Type": "application/json"],
                body: Array(#"{"providerId": "oidc.mock", "idToken": "\#(idToken)", "rawNonce": "\#(rawNonce)"}"#.utf8))
            #expect(signedIn.status == 200, "\(signedIn.bodyText)")
            #expect((try jsonObject(signedIn)["user"] as? [String: Any])?["email"] as? String == "alice@mock.example")

            var other = Browser(deployment)
            let wrongNonce = try await other.send(
                "\(deployment.gatewayURL)/v1/auth/idtoken", method: "POST", headers: ["Content-Type": "application/json"],
                body: Array(#"{"providerId": "oidc.mock", "idToken": "\#(idToken)", "rawNonce": "not-the-raw-nonce"}"#.utf8))
            #expect(wrongNonce.status == 400)
            #expect(try jsonObject(wrongNonce)["code"] as? String == "missing-or-invalid-nonce")
        }
    }

    /// Runs `body` with oidc-provider-mock started and a deployment configured with it as `oidc.mock`.
    static func withMock(_ body: (ThirdPartyOIDCProvider, TestDeployment, CurlHTTPClient) async throws -> Void) async throws {
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        let mock = try await ThirdPartyOIDCProvider.start(userClaims: claims, client: http)
        defer { mock.stop() }
        try await withDeployment(extraProviders: { _ in
            [OIDCProviderConfiguration(providerId: "oidc.mock", issuer: mock.issuer, clientID: client.id, clientSecret: client.secret)]
        }) { deployment in
            try await body(mock, deployment, http)
        }
    }
}
