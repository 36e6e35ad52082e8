import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehouseSQLite
import GatehouseTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The embedded default under a crash (issue #7): `kill -9` of a SQLite-backed `gatehouse
/// demo` process while browsers sign in.
@Suite("SQLite crash safety")
struct CrashSafetyTests {
    /// Collects the session cookies of sign-ins whose result reached the browser.
    actor Completed {
        private(set) var sessions: [String] = []
        func add(_ session: String) { sessions.append(session) }
    }

    @Test("kill -9 during sign-ins: PRAGMA integrity_check is ok and every sign-in that got its result has its session and account")
    func killDuringSignIns() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        // Both servers bind port 0; the demo prints the gateway's URL once it serves. Whatever
        // happens below, the demo does not outlive the test. Its calls to the emulator and to
        // the sample app's hooks may take the longest the settings allow: a sign-in refused
        // for a slow answer on a loaded run would end its browser's loop early.
        let patient = ProcessInfo.processInfo.environment.merging(["GATEHOUSE_HOOK_TIMEOUT": "10", "GATEHOUSE_UPSTREAM_TIMEOUT": "60"]) { $1 }
        try await DemoProcess.with(executable: KeysCommandTests.executable.path, environment: patient) { demo in
            try await Self.killDuringSignIns(demo)
        }
    }

    private static func killDuringSignIns(_ demo: DemoProcess) async throws {
        let (process, folder, gatewayURL) = (demo.process, demo.folder, demo.url)
        let client = CurlHTTPClient()
        defer { client.shutdown() }

        let completed = Completed()
        let browsers = (0..<4).map { _ in
            Task {
                // Until the process dies: then a request fails and the loop ends.
                for _ in 0..<500 {
                    guard let session = try? await Self.signIn(client: client, gateway: gatewayURL) else { return }
                    await completed.add(session)
                }
            }
        }
        // Twelve sign-ins take about a second unloaded; the bound only ends a test that cannot pass.
        let deadline = ContinuousClock.now + .seconds(120)
        while await completed.sessions.count < 12, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(25)) }
        kill(process.pid, SIGKILL)
        for browser in browsers { await browser.value }
        #expect(SpawnedProcess.killedBySignal(await process.exited()))

        let sessions = await completed.sessions
        #expect(sessions.count >= 12)
        let path = folder + "/gatehouse.sqlite"
        let check = try await openSQLite(path).read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
        #expect(check == ["ok"])
        let storage = try SQLiteStorage(path: path)
        for session in sessions {
            let record = try await storage.session(idHash: SecureRandom.digest(session), now: Date())
            #expect(record != nil)
            if let record { #expect(try await storage.account(uid: record.uid) != nil) }
        }
    }

    /// One whole browser sign-in (start → emulator → callback → result); the session cookie.
    static func signIn(client: CurlHTTPClient, gateway: String) async throws -> String {
        let (jar, _) = try await headlessSignIn(client: client, gateway: gateway, returnTo: gateway + "/")
        guard let session = jar.cookies["gatehouse-session"] else { throw FlowError("no session cookie") }
        return session
    }
}
