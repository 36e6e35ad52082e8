import CurlClient
import Foundation
import GRDB
import Testing

/// Issue #21: what a store failure in the middle of a request leaves behind.
@Suite("Store faults")
struct StoreFaultTests {
    @Test("a store error while a refresh is answered leaves the refresh token usable: nothing was rotated")
    func refreshFailingAfterItsReadsRotatesNothing() async throws {
        try await withDeployment { deployment in
            let (_, _, refreshToken) = try await GatewayTokenTests.signedIn(deployment)
            // The links table goes away under the running gateway (as a broken disk or a lost
            // connection would fail the statement): the answer needs the user's links.
            let database = try DatabaseQueue(path: deployment.databasePath)
            try await database.write { try $0.execute(sql: "ALTER TABLE provider_links RENAME TO provider_links_away") }
            let failed = try await GatewayTokenTests.refresh(deployment, refreshToken)
            #expect(failed.status >= 500, "\(failed.status): \(failed.bodyText)")
            try await database.write { try $0.execute(sql: "ALTER TABLE provider_links_away RENAME TO provider_links") }

            // The client keeps its token and retries: it was never spent.
            let retried = try await GatewayTokenTests.refresh(deployment, refreshToken)
            #expect(retried.status == 200, "\(retried.bodyText)")
            let successor = try #require(try jsonObject(retried)["refreshToken"] as? String)
            #expect(try await GatewayTokenTests.refresh(deployment, successor).status == 200, "the family lives on")
        }
    }
}
