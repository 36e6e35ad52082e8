import CurlClient
import Foundation
import GatehouseClient
import GatehouseTestSupport
import Testing

import struct GatehouseCore.GatehouseError

/// `GatehouseClient` as a native app uses it, against a real `gatehouse demo` on loopback: the
/// test plays the app's authentication session (start → emulator → callback) and hands the
/// URL the app was called back with to the client.
@Suite("GatehouseClient against the demo")
struct GatehouseClientTests {
    static let appScheme = "com.example.app:/oauth2redirect"

    /// The `gatehouse` executable built next to the test bundle.
    static var executable: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("gatehouse").path
    }

    /// Runs `body` with a demo and a client of it.
    static func withClient(_ body: (GatehouseClient, DemoProcess) async throws -> Void) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: executable), "build the gatehouse product first (swift build)")
        try await DemoProcess.with(executable: executable) { demo in
            try await body(GatehouseClient(baseURL: try #require(URL(string: demo.url))), demo)
        }
    }

    /// What the system's authentication session does with `request`: opens its URL, lets the
    /// provider approve, follows the redirects (keeping the gateway's transaction cookie), lets
    /// the user choose `decision` on the gateway's consent page, and stops at the app's return
    /// address; that URL.
    static func authenticationSession(_ request: SignInRequest, decision: String = "continue") async throws -> URL {
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        var cookies: [String] = []
        var next = OutboundRequest(url: request.url.absoluteString)
        for _ in 0..<8 {
            if !cookies.isEmpty { next.headers.set("Cookie", cookies.joined(separator: "; ")) }
            let response = try await http.execute(next)
            cookies += response.headers.values("set-cookie").map { String($0.split(separator: ";")[0]) }
            if response.status == 200, let token = consentToken(response.bodyText) {
                // The consent page: the user's click posts its form.
                let gateway = "\(request.url.scheme ?? "http")://\(request.url.host ?? "127.0.0.1"):\(request.url.port ?? 80)"
                next = OutboundRequest(
                    method: "POST", url: "\(gateway)/v1/auth/consent",
                    headers: ["Content-Type": "application/x-www-form-urlencoded", "Origin": gateway],
                    body: Array("consent=\(token)&decision=\(decision)".utf8))
                continue
            }
            guard (300..<400).contains(response.status), let location = response.headers["location"] else {
                throw DemoFailure("the sign-in stopped at \(response.status): \(response.bodyText)")
            }
            if location.hasPrefix(request.returnTo) { return try #require(URL(string: location)) }
            next = OutboundRequest(url: location)
        }
        throw DemoFailure("too many redirects")
    }

    /// The one-time token of the consent page's form.
    static func consentToken(_ page: String) -> String? {
        guard let start = page.range(of: #"name="consent" value=""#) else { return nil }
        return String(page[start.upperBound...].prefix { $0 != "\"" })
    }

    @Test("GitHub: sign-in through the app's scheme, me, photo, live profile, refresh rotation, sign-out")
    func github() async throws {
        try await Self.withClient { client, _ in
            let request = try client.signInRequest(providerId: "github.com", returnTo: Self.appScheme, customParameters: ["login": "octocat"])
            #expect(request.url.absoluteString.contains("result_challenge="))
            #expect(!request.url.absoluteString.contains(request.verifier), "the verifier never leaves the app")
            let callback = try await Self.authenticationSession(request)
            let result = try await client.completeSignIn(callback: callback, for: request)
            #expect(result.providerId == "github.com" && result.operationType == "signIn")
            let first = try #require(await client.credentials)

            let me = try await client.me()
            #expect(me.uid == result.user.uid)
            #expect(me.providers.map(\.providerId) == ["github.com"])
            let photo = try await client.photo(size: 64)
            #expect(photo.contentType.hasPrefix("image/") && !photo.data.isEmpty)
            let live = try await client.providerProfile("github.com")
            #expect(live.username == "octocat")

            // Refresh rotates: new tokens, the client keeps them and they work.
            let second = try await client.refresh()
            #expect(second.refreshToken != first.refreshToken && second.idToken != first.idToken)
            #expect(try await client.me().uid == me.uid)

            // The result cannot be redeemed again once its refresh token was used: a typed problem.
            do {
                try await client.completeSignIn(callback: callback, for: request)
                Issue.record("a spent result was redeemed again")
            } catch GatehouseClientError.problem(let problem) {
                #expect(problem.code == .resultNotFound && problem.status == 404)
            }

            // Sign-out ends the session; tokens kept elsewhere stop working.
            let kept = try #require(await client.credentials)
            try await client.signOut()
            #expect(await client.credentials == nil)
            await #expect(throws: GatehouseClientError.notSignedIn) { try await client.me() }
            let stale = GatehouseClient(baseURL: client.baseURL)
            await stale.restore(kept)
            do {
                _ = try await stale.refresh()
                Issue.record("a refresh token of a signed-out session worked")
            } catch GatehouseClientError.problem(let problem) {
                #expect(problem.code == .invalidRefreshToken)
                #expect(problem.status == 400)  // RFC 6749 §5.2 invalid_grant
            }
            #expect(await stale.credentials == nil, "a dead refresh token is forgotten")
        }
    }

    @Test("Microsoft: sign-in through a desktop loopback address on any port, me, photo, live profile")
    func microsoft() async throws {
        try await Self.withClient { client, _ in
            let request = try client.signInRequest(
                providerId: "microsoft.com", returnTo: "http://127.0.0.1:53124/callback", customParameters: ["login_hint": "AdeleV@contoso.example"])
            let callback = try await Self.authenticationSession(request)
            // In the query, where the app's listener reads it.
            #expect(callback.absoluteString.hasPrefix("http://127.0.0.1:53124/callback?gatehouse_result="))
            let result = try await client.completeSignIn(callback: callback, for: request)
            #expect(result.providerId == "microsoft.com")
            let me = try await client.me()
            #expect(me.providers.first?.providerId == "microsoft.com")
            #expect(me.email?.lowercased() == "adelev@contoso.example")
            #expect(try await client.photo().data.count > 0)
            #expect(try await client.providerProfile("microsoft.com").federatedId == me.providers.first?.federatedId)
            // A provider the user has not linked: a typed problem, with its member.
            do {
                _ = try await client.providerProfile("github.com")
                Issue.record("an unlinked provider answered")
            } catch GatehouseClientError.problem(let problem) {
                #expect(problem.code == .providerNotLinked && problem.status == 404)
                #expect(problem.extensions["providerId"] == "github.com")
            }
        }
    }

    @Test(
        "an app links a provider and re-authenticates with linkRequest / reauthenticateRequest and completeSignIn (a link once its user confirmed the identity); a cancelled consent is a typed sign-in-cancelled"
    )
    func linkAndReauthenticate() async throws {
        try await Self.withClient { client, _ in
            let signIn = try client.signInRequest(providerId: "github.com", returnTo: Self.appScheme, customParameters: ["login": "octocat"])
            let first = try await client.completeSignIn(callback: try await Self.authenticationSession(signIn), for: signIn)
            let before = try #require(await client.credentials)

            // Link: the result of the link, and the same session's tokens.
            let link = try await client.linkRequest(
                providerId: "oidc.emulator", returnTo: Self.appScheme, customParameters: ["login_hint": "olive@oidc.example"])
            #expect(link.url.absoluteString.contains("start_token=") && !link.url.absoluteString.contains(before.idToken))
            let callback = try await Self.authenticationSession(link)
            do {
                try await client.completeSignIn(callback: callback, for: link)
                Issue.record("a link was written before its user saw the identity")
            } catch GatehouseClientError.problem(let problem) {
                #expect(problem.code == .linkConfirmationRequired && problem.extensions["email"] == "olive@oidc.example")
            }
            #expect(try await client.me().providers.map(\.providerId) == ["github.com"])
            let linked = try await client.completeSignIn(callback: callback, for: link, confirmingLink: true)
            #expect(linked.operationType == "link" && linked.user.uid == first.user.uid)
            #expect(await client.credentials == before)
            #expect(Set(try await client.me().providers.map(\.providerId)) == ["github.com", "oidc.emulator"])

            // Re-authentication: a new session, new tokens, the same account.
            let reauth = try await client.reauthenticateRequest(
                providerId: "github.com", returnTo: Self.appScheme, customParameters: ["login": "octocat"])
            let again = try await client.completeSignIn(callback: try await Self.authenticationSession(reauth), for: reauth)
            #expect(again.operationType == "reauthenticate" && again.user.uid == first.user.uid)
            #expect(try #require(await client.credentials).idToken != before.idToken)

            // Cancel on the consent page: the app learns it, typed; nothing changed.
            let cancelled = try await client.linkRequest(
                providerId: "microsoft.com", returnTo: Self.appScheme, customParameters: ["login_hint": "AdeleV@contoso.example"])
            do {
                try await client.completeSignIn(callback: try await Self.authenticationSession(cancelled, decision: "cancel"), for: cancelled)
                Issue.record("a cancelled link completed")
            } catch GatehouseClientError.problem(let problem) {
                #expect(problem.code == .signInCancelled && problem.status == 403)
            }
            #expect(Set(try await client.me().providers.map(\.providerId)) == ["github.com", "oidc.emulator"])
        }
    }

    @Test(
        "a desktop app's link through a loopback address waits for its user: the identity is named, nothing is linked until confirmingLink is true; false cancels"
    )
    func loopbackLinkIsConfirmed() async throws {
        try await Self.withClient { client, _ in
            let desktop = "http://127.0.0.1:53124/callback"
            let signIn = try client.signInRequest(providerId: "github.com", returnTo: desktop, customParameters: ["login": "octocat"])
            try await client.completeSignIn(callback: try await Self.authenticationSession(signIn), for: signIn)

            let link = try await client.linkRequest(
                providerId: "oidc.emulator", returnTo: desktop, customParameters: ["login_hint": "olive@oidc.example"])
            let callback = try await Self.authenticationSession(link)
            for _ in 0..<2 {  // asked again, the same answer: the result waits
                do {
                    try await client.completeSignIn(callback: callback, for: link)
                    Issue.record("a loopback link was written without its user's confirmation")
                } catch GatehouseClientError.problem(let problem) {
                    #expect(problem.code == .linkConfirmationRequired && problem.status == 409)
                    #expect(problem.extensions["providerId"] == "oidc.emulator")
                    #expect(problem.extensions["email"] == "olive@oidc.example")
                }
            }
            #expect(try await client.me().providers.map(\.providerId) == ["github.com"])
            let linked = try await client.completeSignIn(callback: callback, for: link, confirmingLink: true)
            #expect(linked.operationType == "link")
            #expect(Set(try await client.me().providers.map(\.providerId)) == ["github.com", "oidc.emulator"])

            // Not recognised: cancelled, answered once, nothing linked.
            let other = try await client.linkRequest(
                providerId: "microsoft.com", returnTo: desktop, customParameters: ["login_hint": "AdeleV@contoso.example"])
            let otherCallback = try await Self.authenticationSession(other)
            do {
                try await client.completeSignIn(callback: otherCallback, for: other, confirmingLink: false)
                Issue.record("a declined link completed")
            } catch GatehouseClientError.problem(let problem) {
                #expect(problem.code == .signInCancelled && problem.status == 403)
            }
            do {
                try await client.completeSignIn(callback: otherCallback, for: other, confirmingLink: true)
                Issue.record("a declined link's result redeemed again")
            } catch GatehouseClientError.problem(let problem) {
                #expect(problem.code == .resultNotFound)
            }
            #expect(Set(try await client.me().providers.map(\.providerId)) == ["github.com", "oidc.emulator"])
        }
    }

    @Test("a callback for another address, or without a result, is refused before any request")
    func invalidCallbacks() async throws {
        let client = GatehouseClient(baseURL: try #require(URL(string: "http://127.0.0.1:9")))
        let request = try client.signInRequest(providerId: "github.com", returnTo: Self.appScheme)
        for url in ["com.evil.app:/oauth2redirect#gatehouse_result=x", "com.example.app:/oauth2redirect", "com.example.app:/oauth2redirect#other=1"] {
            #expect(throws: GatehouseClientError.invalidCallback) { try request.resultID(from: try #require(URL(string: url))) }
        }
        #expect(try request.resultID(from: try #require(URL(string: "com.example.app:/oauth2redirect#gatehouse_result=abc"))) == "abc")
        // A loopback return's result comes in the query, after the address's own query if it has one.
        let desktop = try client.signInRequest(providerId: "github.com", returnTo: "http://127.0.0.1:53124/callback?app=1")
        for url in [
            "http://127.0.0.1:53124/callback?app=1&gatehouse_result=abc", "http://127.0.0.1:53124/callback?app=1#gatehouse_result=abc",
            "http://127.0.0.1:53124/callback?app=1&gatehouse_result=abc#gatehouse_result=abc",
        ] {
            #expect(try desktop.resultID(from: try #require(URL(string: url))) == "abc", "\(url)")
        }
        for url in [
            "http://127.0.0.1:53124/callback?app=1", "http://127.0.0.1:53124/callback?app=1x&gatehouse_result=abc",
            "http://127.0.0.1:53124/callback?app=1?gatehouse_result=abc", "http://127.0.0.1:5312/callback?app=1&gatehouse_result=abc",
        ] {
            #expect(throws: GatehouseClientError.invalidCallback, "\(url)") { try desktop.resultID(from: try #require(URL(string: url))) }
        }
    }

    @Test("a gateway URL over plain http beyond loopback is refused before any request; https and loopback http are taken")
    func plainHTTPIsRefused() async throws {
        let refused = GatehouseClientError.invalidArgument("The gateway's URL must use https (http only to a loopback address).")
        // `.invalid` names resolve nowhere: a request that did go out fails with another error.
        for base in ["http://gatehouse.invalid", "http://10.0.0.5.invalid:8080", "ftp://gatehouse.invalid"] {
            let client = GatehouseClient(baseURL: try #require(URL(string: base)))
            #expect(throws: refused, "\(base)") { _ = try client.signInRequest(providerId: "github.com", returnTo: Self.appScheme) }
            await client.restore(Credentials(idToken: "id", refreshToken: "refresh", expiresAt: Date().addingTimeInterval(3600)))
            await #expect(throws: refused, "\(base)") { _ = try await client.me() }
        }
        for base in ["https://gatehouse.example", "http://127.0.0.1:9", "http://[::1]:9", "http://localhost:9"] {
            let client = GatehouseClient(baseURL: try #require(URL(string: base)))
            #expect(throws: Never.self, "\(base)") { _ = try client.signInRequest(providerId: "github.com", returnTo: Self.appScheme) }
        }
    }

    @Test("a start URL on another origin than the client's base URL is refused, not handed to the app to open")
    func foreignStartURLIsRefused() async throws {
        try await Self.withClient { client, demo in
            let signIn = try client.signInRequest(providerId: "github.com", returnTo: Self.appScheme, customParameters: ["login": "octocat"])
            try await client.completeSignIn(callback: try await Self.authenticationSession(signIn), for: signIn)
            // The same gateway under another name: its start URLs name the address it was
            // started with (`demo.url`), another origin than the one this client was given.
            let port = try #require(URL(string: demo.url)?.port)
            let renamed = GatehouseClient(baseURL: try #require(URL(string: "http://localhost:\(port)")))
            await renamed.restore(await client.credentials)
            #expect(try await renamed.me().uid == (try await client.me().uid))
            let refused = GatehouseClientError.invalidArgument(
                "The gateway's start URL is not on baseURL's origin: give the client the gateway's public URL (GATEHOUSE_PUBLIC_URL).")
            await #expect(throws: refused) { _ = try await renamed.linkRequest(providerId: "oidc.emulator", returnTo: Self.appScheme) }
            await #expect(throws: refused) { _ = try await renamed.reauthenticateRequest(providerId: "github.com", returnTo: Self.appScheme) }
        }
    }

    @Test("every problem code of the gateway has its typed case; an unknown one is .other")
    func problemCodes() {
        #expect(Set(ProblemCode.allKnown.map(\.rawValue)) == Set(GatehouseError.Code.allCases.map(\.rawValue)))
        #expect(ProblemCode(rawValue: "invalid-refresh-token") == .invalidRefreshToken)
        #expect(ProblemCode(rawValue: "brand-new-code") == .other("brand-new-code"))
    }
}
