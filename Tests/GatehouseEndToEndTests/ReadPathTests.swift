import CurlClient
import Foundation
import GRDB
import GatehouseCore
import Testing

/// Issue #18: the steady-state signed-in read path answers from memory.
@Suite("Read path")
struct ReadPathTests {
    @Test(
        "once read, /v1/me (cookie and bearer) needs no database: with the accounts, links and sessions tables gone it still answers; a sign-out through the gateway is still seen at once"
    )
    func signedInReadsNeedNoDatabase() async throws {
        try await withDeployment { deployment in
            var (browser, idToken, _) = try await GatewayTokenTests.signedIn(deployment)
            let me = "\(deployment.gatewayURL)/v1/me"
            let fresh = try await browser.send(me)
            #expect(fresh.status == 200)
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 200)
            // The tables go away under the running gateway (only the test does such a thing: it
            // shows where the answers come from).
            let database = try openSQLite(deployment.databasePath)
            let tables = ["accounts", "provider_links", "sessions"]
            try await database.write { db in for table in tables { try db.execute(sql: "ALTER TABLE \(table) RENAME TO \(table)_away") } }
            for _ in 0..<3 {
                let cookie = try await browser.send(me)
                #expect(cookie.status == 200, "\(cookie.bodyText)")
                #expect(cookie.bodyText == fresh.bodyText)
                let bearer = try await GatewayTokenTests.bearer(deployment, idToken)
                #expect(bearer.status == 200, "\(bearer.bodyText)")
            }
            try await database.write { db in for table in tables { try db.execute(sql: "ALTER TABLE \(table)_away RENAME TO \(table)") } }

            #expect(try await browser.send("\(deployment.gatewayURL)/v1/auth/signout", method: "POST").status == 204)
            #expect(try await browser.send(me).status == 401)
            #expect(try await GatewayTokenTests.bearer(deployment, idToken).status == 401)
        }
    }
}

extension ReadPathTests {
    @Test("a live profile fetched again unchanged writes nothing to the store; a changed one is stored")
    func unchangedLiveProfileWritesNothing() async throws {
        try await withDeployment { deployment in
            var olive = Browser(deployment)
            #expect(try await olive.complete(login: UpstreamTrustTests.olive, provider: "oidc.emulator").status == 200)
            let database = try openSQLite(deployment.databasePath)
            func stored() async throws -> (updatedAt: String, profile: String) {
                try await database.read { db in
                    let row = try #require(
                        try Row.fetchOne(db, sql: "SELECT updated_at, profile_json FROM provider_links WHERE provider_id = 'oidc.emulator'"))
                    return ("\(row["updated_at"] as DatabaseValue)", String(decoding: row["profile_json"] as Data, as: UTF8.self))
                }
            }
            let live = "\(deployment.gatewayURL)/v1/me/providers/oidc.emulator/profile?refresh=true"
            #expect(try await olive.send(live).status == 200)
            let first = try await stored()
            deployment.clock.advance(by: 5)
            #expect(try await olive.send(live).status == 200)
            #expect(try await stored().updatedAt == first.updatedAt, "an unchanged profile was written again")

            try await UpstreamTrustTests.choosePicture(deployment, "\(deployment.emulatorURL)/oidc/pictures/elsewhere")
            #expect(try await olive.send(live).status == 200)
            let changed = try await stored()
            #expect(changed.updatedAt != first.updatedAt)
            #expect(changed.profile.contains("/oidc/pictures/elsewhere"))
        }
    }
}
