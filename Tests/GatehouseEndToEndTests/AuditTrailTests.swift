import CurlClient
import Foundation
import GatehouseCore
import GatehouseSQLite
import Testing

/// Issue #19: one audit line per security-relevant change, with actor, target and request id,
/// never a secret.
@Suite("Audit trail")
struct AuditTrailTests {
    /// The audit lines of the deployment's log, as JSON objects.
    static func auditLines(_ lines: [String]) -> [[String: Any]] {
        lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.filter { $0["audit"] as? Bool == true }
    }

    @Test(
        "each change is audited exactly once, with its actor, account, provider and request id: account created, provider linked and unlinked, re-authenticated, signed out (one and all), disabled, enabled, sessions revoked, account deleted"
    )
    func everyEventExactlyOnce() async throws {
        try await withDeployment { deployment in
            let gateway = deployment.gatewayURL
            var browser = Browser(deployment)
            let uid = try account(try await browser.complete(login: "octocat")).uid
            #expect(try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link").status == 200)
            #expect(try await browser.complete(login: "octocat", mode: "reauthenticate").status == 200)
            #expect(try await browser.send("\(gateway)/v1/me/providers/oidc.emulator", method: "DELETE").status == 200)
            #expect(try await browser.send("\(gateway)/v1/auth/signout", method: "POST").status == 204)
            _ = try await browser.complete(login: "octocat")  // a returning user: nothing to audit
            #expect(try await browser.send("\(gateway)/v1/auth/signout?all=true", method: "POST").status == 204)

            let storage = try GatehouseSQLiteStorageForSpec.open(deployment.databasePath)
            let admin = try await ServiceKeyService(storage: storage).create(name: "ops", scopes: ["admin"])
            for action in ["disable", "enable", "revoke-sessions"] {
                let answer = try await ServiceKeyRoutesTests.call(deployment, "/v1/users/\(uid)/\(action)", key: admin.secret, method: "POST")
                #expect(answer.status == 204, "\(action)")
            }
            _ = try await browser.complete(login: "octocat")
            #expect(try await browser.send("\(gateway)/v1/me", method: "DELETE").status == 204)

            let lines = deployment.logs.lines
            let audited = Self.auditLines(lines)
            let expected: [(String, String, String?)] = [
                ("account.created", "user:\(uid)", "github.com"), ("provider.linked", "user:\(uid)", "oidc.emulator"),
                ("account.reauthenticated", "user:\(uid)", "github.com"), ("provider.unlinked", "user:\(uid)", "oidc.emulator"),
                ("session.signed-out", "user:\(uid)", nil), ("session.signed-out-all", "user:\(uid)", nil),
                ("account.disabled", "service-key:\(admin.key.id)", nil), ("account.enabled", "service-key:\(admin.key.id)", nil),
                ("account.sessions-revoked", "service-key:\(admin.key.id)", nil), ("account.deleted", "user:\(uid)", nil),
            ]
            let holds = audited.map { $0["audit.event"] as? String } == expected.map(\.0)
            #expect(holds, "\(audited)")
            for (line, (event, actor, provider)) in zip(audited, expected) {
                #expect(line["audit.actor"] as? String == actor, "\(event)")
                #expect(line["user.id"] as? String == uid, "\(event)")
                #expect(line["provider.id"] as? String == provider, "\(event)")
                #expect((line["request.id"] as? String)?.isEmpty == false, "\(event)")
            }
            // Only ids: never the admin key's secret, a session cookie or a token.
            let text = audited.map { "\($0)" }.joined()
            #expect(!text.contains(admin.secret) && !text.contains("ghsk_"))
            for cookie in browser.jar.header.map(\.value) { #expect(!text.contains(cookie)) }
        }
    }

    @Test(
        "the command line audits what it changes: service key created and revoked, signing key rotated (JSON lines on standard error, never the secret)"
    )
    func commandLineEvents() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-audit-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let created = try await KeysCommandTests.run(["keys", "create-service", "ops", "--scopes", "admin", "--data-dir", folder])
        #expect(created.status == 0, "\(created.output)")
        let secret = try #require(created.output.split(separator: "\n").last.map(String.init))
        let foundId = created.output.firstRange(of: #/sk_[A-Za-z0-9_-]+/#).map { String(created.output[$0]) }
        let id = try #require(foundId)
        let revoked = try await KeysCommandTests.run(["keys", "revoke", id, "--data-dir", folder])
        #expect(revoked.status == 0, "\(revoked.output)")
        // A store the demo did not make takes its encryption key from the configuration.
        let rotated = try await KeysCommandTests.run(
            ["keys", "rotate-signing", "--data-dir", folder],
            environment: ["GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString()])
        #expect(rotated.status == 0, "\(rotated.output)")
        let events = [created, revoked, rotated].map { run in
            Self.auditLines(run.output.split(separator: "\n").map(String.init)).map {
                [$0["audit.event"] as? String, $0["audit.actor"] as? String, $0["key.id"] as? String]
            }
        }
        #expect(events[0] == [["service-key.created", "command-line", id]])
        #expect(events[1] == [["service-key.revoked", "command-line", id]])
        #expect(events[2].count == 1 && events[2].first?[0] == "signing-key.rotated")
        let holds = !created.output.split(separator: "\n").dropLast().contains { $0.contains(secret) }
        #expect(holds, "the secret is printed once, last")
    }
}
