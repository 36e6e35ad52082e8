import CurlClient
import Foundation
import GatehouseCore
import Testing

/// Issue #23: native and desktop apps get their result through their own URL scheme or a
/// loopback port (RFC 8252), always bound to a verifier, never with a session cookie.
@Suite("Native and desktop apps")
struct NativeAppTests {
    static let scheme = "com.example.app:/oauth2redirect"
    static let loopback = "http://127.0.0.1/callback"

    /// A deployment whose allow-list also has the sample app's addresses; binding is off for
    /// web returns, so the tests show native returns need it regardless.
    static func withNativeDeployment(_ body: (TestDeployment) async throws -> Void) async throws {
        try await withDeployment(gateway: {
            $0.returnToAllowList += [scheme, loopback]
            $0.requireResultBinding = false
        }) { try await body($0) }
    }

    /// start → emulator → callback for `returnTo`; the callback's answer.
    static func callback(_ browser: inout Browser, returnTo: String, provider: String = "github.com") async throws -> OutboundResponse {
        // The emulator approves at once for its hint parameter (GitHub's `login`, others' `login_hint`).
        let hint = provider == "github.com" ? "login=octocat" : "login_hint=\(FormEncoding.escape(MicrosoftSignInTests.adele))"
        let start = try await browser.start("return_to=\(FormEncoding.escape(returnTo))&\(hint)", provider: provider)
        guard start.status == 302, let authorize = start.headers["location"] else { return start }
        let approved = try await browser.deployment.client.execute(OutboundRequest(url: authorize))
        let callbackURL = try #require(approved.headers["location"])
        return try await browser.send(callbackURL)
    }

    /// Whether the answer sets a session cookie.
    static func setsSession(_ response: OutboundResponse) -> Bool {
        response.headers.values("set-cookie").contains {
            ($0.hasPrefix("gatehouse-session=") || $0.hasPrefix("__Host-gatehouse-session=")) && !$0.contains("Max-Age=0")
        }
    }

    @Test("a private-use scheme: 303 to com.example.app:/oauth2redirect#gatehouse_result=…, no cookie; only the right verifier redeems")
    func privateUseScheme() async throws {
        try await Self.withNativeDeployment { deployment in
            for provider in ["github.com", "microsoft.com"] {
                var browser = Browser(deployment)
                let callback = try await Self.callback(&browser, returnTo: Self.scheme, provider: provider)
                #expect(callback.status == 303, "\(provider): \(callback.bodyText)")
                let location = try #require(callback.headers["location"])
                #expect(location.hasPrefix("\(Self.scheme)#gatehouse_result="), "\(location)")
                #expect(!Self.setsSession(callback), "no session cookie: \(callback.headers.values("set-cookie"))")
                let id = String(location[location.range(of: "#gatehouse_result=")!.upperBound...])

                // Without the verifier, or with another one: nothing, and the result survives.
                let bare = try await deployment.client.execute(
                    OutboundRequest(
                        method: "POST", url: "\(deployment.gatewayURL)/v1/auth/result", headers: ["Content-Type": "application/json"],
                        body: Array(#"{"result":"\#(id)"}"#.utf8)))
                #expect(bare.status == 404 || bare.status == 400, "\(bare.status) \(bare.bodyText)")
                let wrong = try await deployment.client.execute(
                    OutboundRequest(
                        method: "POST", url: "\(deployment.gatewayURL)/v1/auth/result", headers: ["Content-Type": "application/json"],
                        body: Array(#"{"result":"\#(id)","result_verifier":"\#(ResultKey().verifier)"}"#.utf8)))
                #expect(wrong.status == 404)
                // The app holds the verifier: tokens.
                let redeemed = try await browser.result(id)
                #expect(redeemed.status == 200, "\(redeemed.bodyText)")
                let answer = try jsonObject(redeemed)
                #expect(answer["idToken"] is String && answer["refreshToken"] is String)
            }
        }
    }

    @Test("a native start without result_challenge is refused although binding is off for web returns")
    func bindingIsMandatory() async throws {
        try await Self.withNativeDeployment { deployment in
            for returnTo in [Self.scheme, "http://127.0.0.1:51234/callback"] {
                var browser = Browser(deployment)
                let start = try await browser.send(
                    "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(returnTo))&login=octocat")
                #expect(start.status == 400, "\(returnTo)")
                #expect(try jsonObject(start)["code"] as? String == "invalid-argument")
                #expect((try jsonObject(start)["detail"] as? String)?.contains("result_challenge") == true)
            }
            // The web return of the same deployment still works unbound (binding off).
            var web = Browser(deployment)
            let start = try await web.send(
                "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(TestDeployment.returnTo))&login=octocat")
            #expect(start.status == 302)
        }
    }

    @Test("a desktop loopback return on any port of 127.0.0.1 is accepted; another host or a longer path is refused")
    func loopbackPorts() async throws {
        try await Self.withNativeDeployment { deployment in
            var browser = Browser(deployment)
            let callback = try await Self.callback(&browser, returnTo: "http://127.0.0.1:53124/callback")
            #expect(callback.status == 303)
            #expect(callback.headers["location"]?.hasPrefix("http://127.0.0.1:53124/callback#gatehouse_result=") == true)
            #expect(!Self.setsSession(callback))
            for refused in [
                "http://10.0.0.5:53124/callback", "http://localhost:53124/callback", "http://127.0.0.1:53124/callbackx",
                "https://127.0.0.1:53124/callback", "myapp://auth", "javascript:alert(1)", "data:text/html,x", "file:///etc/passwd",
                "blob:https://app.example.com/x", "com.example.app://user@host/oauth2redirect",
            ] {
                var other = Browser(deployment)
                let start = try await other.start("return_to=\(FormEncoding.escape(refused))&login=octocat")
                #expect(start.status == 400, "\(refused)")
                #expect(try jsonObject(start)["code"] as? String == "invalid-return-to", "\(refused)")
            }
        }
    }

    @Test("a web return keeps its session cookie")
    func webReturnKeepsCookie() async throws {
        try await Self.withNativeDeployment { deployment in
            var browser = Browser(deployment)
            let callback = try await Self.callback(&browser, returnTo: TestDeployment.returnTo)
            #expect(callback.status == 303)
            #expect(Self.setsSession(callback))
        }
    }
}
