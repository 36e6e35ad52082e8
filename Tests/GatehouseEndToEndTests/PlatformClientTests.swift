import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import ProviderEmulator
import Testing

/// An OpenID provider as apps use it: one client id per platform (the app's ID token names its
/// own as `aud`), and a provider configured for ID-token sign-in only, without a client secret.
@Suite("Per-platform client ids and ID-token-only providers")
struct PlatformClientTests {
    /// The gateway's own (web) client id at the emulator's issuer.
    static let webClient = EmulatorConfiguration.demoOIDCClient.id

    /// `POST /v1/auth/idtoken` with a token minted by the emulator for Olive, `extra` adding
    /// members to the mint request (`audience`, `audiences`, `azp`).
    static func signIn(_ deployment: TestDeployment, _ extra: String) async throws -> OutboundResponse {
        let token = try await OIDCSignInTests.mint(deployment, issuer: "oidc", hint: OIDCSignInTests.olive, extra: extra)
        var browser = Browser(deployment)
        return try await OIDCSignInTests.idTokenSignIn(&browser, #"{"providerId": "oidc.emulator", "idToken": "\#(token)"}"#)
    }

    @Test(
        "GATEHOUSE_OIDC_<NAME>_AUDIENCES: an ID token for an app's own client id signs in; several audiences need a trusted azp; an untrusted audience or azp is refused"
    )
    func platformAudiences() async throws {
        try await withDeployment(openID: { provider in
            if provider.providerId == "oidc.emulator" { provider.platformAudiences = ["ios-client-id", "android-client-id"] }
        }) { deployment in
            let ios = try await Self.signIn(deployment, #", "audience": "ios-client-id""#)
            #expect(ios.status == 200, "\(ios.bodyText)")
            let both = try await Self.signIn(deployment, #", "audiences": ["\#(Self.webClient)", "android-client-id"], "azp": "android-client-id""#)
            #expect(both.status == 200, "\(both.bodyText)")
            for (extra, reason) in [
                (#", "audiences": ["\#(Self.webClient)", "ios-client-id"]"#, "no authorized party"),
                (#", "audience": "ios-client-id", "azp": "another-client""#, "authorized party is another client"),
                (#", "audiences": ["ios-client-id", "untrusted-party"], "azp": "ios-client-id""#, "does not trust"),
                (#", "audience": "another-client""#, "another client"),
            ] {
                let refused = try await Self.signIn(deployment, extra)
                #expect(refused.status == 400, "\(extra): \(refused.bodyText)")
                #expect(refused.bodyText.contains(reason), "\(extra): \(refused.bodyText)")
            }
        }
        // Without the setting, the app's client id is another client (what main answered before).
        try await withDeployment { deployment in
            let refused = try await Self.signIn(deployment, #", "audience": "ios-client-id""#)
            #expect(refused.status == 400 && refused.bodyText.contains("another client"), "\(refused.bodyText)")
        }
    }

    @Test("an OpenID provider without a client secret serves ID-token sign-in; its start answers operation-not-allowed saying so")
    func idTokenOnlyProvider() async throws {
        try await withDeployment(openID: { provider in
            if provider.providerId == "oidc.emulator" { provider.clientSecret = "" }
        }) { deployment in
            var browser = Browser(deployment)
            let start = try await browser.start(
                "return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login_hint=\(FormEncoding.escape(OIDCSignInTests.olive))",
                provider: "oidc.emulator")
            #expect(start.status == 400, "\(start.bodyText)")
            #expect(try jsonObject(start)["code"] as? String == "operation-not-allowed")
            #expect(start.bodyText.contains("ID-token sign-in only"))
            let signedIn = try await Self.signIn(deployment, "")
            #expect(signedIn.status == 200, "\(signedIn.bodyText)")
        }
    }

    @Test("gatehouse check --offline accepts an OpenID provider with no client secret (ID-token sign-in only) and says so")
    func serveSettingsWithoutSecret() async throws {
        try await withEmulatorAndFolder("gatehouse-idtoken") { emulatorURL, folder in
            let settings = [
                "GATEHOUSE_PUBLIC_URL": ServeProcess.publicURL, "GATEHOUSE_DATA_DIR": folder, "GATEHOUSE_DEVELOPMENT": "true",
                "GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString(), "GATEHOUSE_OIDC_APP_ISSUER": "\(emulatorURL)/oidc",
                "GATEHOUSE_OIDC_APP_CLIENT_ID": Self.webClient, "GATEHOUSE_OIDC_APP_AUDIENCES": "ios-client-id, android-client-id",
            ]
            let checked = try await KeysCommandTests.run(
                ["check", "--offline"], environment: settings, removing: ["GATEHOUSE_DATABASE_URL", "GATEHOUSE_OIDC_APP_CLIENT_SECRET"])
            #expect(checked.status == 0, "\(checked.output)")
            #expect(checked.output.contains("provider oidc.app: discovery ok (ID-token sign-in only: no client secret)"), "\(checked.output)")
        }
    }

    @Test("gatehouse demo --emulator-port 0 prints the emulator's URL on a line of its own, and it answers")
    func demoPrintsTheEmulator() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        try await DemoProcess.with(executable: KeysCommandTests.executable.path) { demo in
            let output = (try? String(contentsOfFile: demo.folder + ".out", encoding: .utf8)) ?? ""
            let foundLine = output.split(separator: "\n").first { $0.hasPrefix("Emulator at http://127.0.0.1:") }
            let line = try #require(foundLine, "\(output)")
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let discovery = try await client.execute(
                OutboundRequest(url: "\(line.dropFirst("Emulator at ".count))/oidc/.well-known/openid-configuration"))
            #expect(discovery.status == 200)
        }
    }
}
