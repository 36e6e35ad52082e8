import CurlClient
import Foundation
import ProviderEmulator
import StandardWebhooks
import Testing

/// The sample app's hook receiver, which the documentation offers as a model: what earns a role.
@Suite struct SampleAppHookTests {
    /// A signed `before-sign-in` call with these `account` and `profile` members.
    static func beforeSignIn(_ base: String, _ http: CurlHTTPClient, account: String, profile: String) async throws -> [String: Any] {
        let body = Array(#"{"type":"before-sign-in","data":{"account":\#(account),"profile":\#(profile)}}"#.utf8)
        let secret = try #require(WebhookSecret(EmulatorConfiguration.demoHookSecret))
        var headers: OutboundHeaders = ["Content-Type": "application/json"]
        for (name, value) in WebhookSigner(secrets: [secret]).headers(
            id: "msg_\(UUID().uuidString)", timestamp: Int(Date().timeIntervalSince1970), body: body)
        {
            headers.add(name, value)
        }
        let answer = try await http.execute(
            OutboundRequest(method: "POST", url: "\(base)/sample-app/hooks/before-sign-in", headers: headers, body: body))
        #expect(answer.status == 200, "\(answer.bodyText)")
        return try answer.jsonObject()
    }

    @Test("the administrator's role needs the administrator's address verified, not another address's flag")
    func roleNeedsItsOwnAddressVerified() async throws {
        try await withEmulator { base, http in
            let admin = "octocat@github.com"
            let granted = try await Self.beforeSignIn(
                base, http, account: #"{"email":"\#(admin)","emailVerified":true}"#, profile: #"{"email":"eve@x.example","emailVerified":false}"#)
            #expect((granted["customClaims"] as? [String: Any])?["role"] as? String == "admin")
            // The account names the administrator's address, unverified; this sign-in brings a
            // verified address of its own.
            let mixed = try await Self.beforeSignIn(
                base, http, account: #"{"email":"\#(admin)","emailVerified":false}"#, profile: #"{"email":"eve@x.example","emailVerified":true}"#)
            #expect(mixed["decision"] as? String == "allow" && mixed["customClaims"] == nil, "\(mixed)")
        }
    }
}
