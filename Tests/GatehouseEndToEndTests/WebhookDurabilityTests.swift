import CurlClient
import Foundation
import GRDB
import GatehouseCore
import GatehousePostgres
import GatehouseTestSupport
import ProviderEmulator
import Testing

/// Webhooks under `kill -9`: `gatehouse serve` child processes, the emulator's sample receiver
/// in this process. Every session the store holds was committed with its `account.signed-in`
/// event, so after the crash the receiver must get one event per session row, whoever
/// delivers it.
@Suite("Webhooks under faults", .serialized)
struct WebhookDurabilityTests {
    /// The settings that send every event to the sample receiver at `emulatorURL`. A delivery
    /// may take 5 s (a claim's lease is then 10 s), a store operation 30 s: on a loaded machine
    /// neither may turn a slow answer into a failure, which would add a backoff or refuse a
    /// sign-in of the burst.
    static func receiver(_ emulatorURL: String) -> [String: String] {
        [
            "GATEHOUSE_WEBHOOK_SAMPLE_APP_URL": "\(emulatorURL)/sample-app/webhooks",
            "GATEHOUSE_WEBHOOK_SAMPLE_APP_SECRETS": EmulatorConfiguration.demoWebhookSecret, "GATEHOUSE_WEBHOOK_TIMEOUT": "5",
            "GATEHOUSE_DATABASE_TIMEOUT": "30",
        ]
    }

    /// Waits until the receiver got `committed` distinct `account.signed-in` events, or 200 s:
    /// an event that failed three times (the receiver down during a long burst, or a delivery
    /// cut) next waits 120 s ± 20 %, after 5 and 30 s.
    static func deliveries(_ client: CurlHTTPClient, _ emulatorURL: String, reaching committed: Int) async throws -> Set<String> {
        let waiting = ContinuousClock.now
        var events = try await Self.signedInEvents(client, emulatorURL)
        while events.ids.count < committed, ContinuousClock.now - waiting < .seconds(200) {
            try await Task.sleep(for: .milliseconds(200))
            events = try await Self.signedInEvents(client, emulatorURL)
        }
        return events.ids
    }

    /// The ids of the `account.signed-in` events the sample receiver got (each id once) and the
    /// number of deliveries, duplicates included.
    static func signedInEvents(_ client: CurlHTTPClient, _ emulatorURL: String) async throws -> (ids: Set<String>, deliveries: Int) {
        let response = try await client.execute(OutboundRequest(url: "\(emulatorURL)/sample-app/webhooks?format=json"))
        let list = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [[String: Any]])
        let signedIn = list.filter { ($0["body"] as? String)?.contains(#""type":"account.signed-in""#) == true }
        return (Set(signedIn.compactMap { $0["id"] as? String }), signedIn.count)
    }

    /// Sign-ins from 4 browsers against `gateways` in turn, `rounds` each or until `stop` says
    /// so; the number acknowledged (their result answered).
    static func burst(
        _ client: CurlHTTPClient, _ gateways: [String], rounds: Int = 400, until stop: @escaping @Sendable () async -> Bool
    ) async -> Int {
        await withTaskGroup(of: Int.self) { group in
            for browser in 0..<4 {
                group.addTask {
                    var done = 0
                    for round in 0..<rounds {
                        if await stop() { break }
                        let gateway = gateways[(browser + round) % gateways.count]
                        guard
                            (try? await headlessSignIn(
                                client: client, gateway: gateway, returnTo: TestDeployment.returnTo, publicURL: ServeProcess.publicURL)) != nil
                        else {
                            continue
                        }
                        done += 1
                    }
                    return done
                }
            }
            return await group.reduce(0, +)
        }
    }

    @Test("kill -9 in a burst of sign-ins on SQLite, then a restart: every committed sign-in's event is delivered")
    func killOnSQLite() async throws {
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        try await withEmulatorAndFolder("webhook-kill") { emulatorURL, folder in
            let key = TokenVault.generateKey()
            // The receiver is down during the burst: events pile up in the outbox.
            _ = try await client.execute(
                OutboundRequest(
                    method: "POST", url: "\(emulatorURL)/_emulator/faults", headers: ["Content-Type": "application/json"],
                    body: Array(#"{"endpoint":"POST /sample-app/webhooks","status":503}"#.utf8)))
            let first = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: key, folder: folder, extra: Self.receiver(emulatorURL))
            let killed = Counter()
            let burst = Task { await Self.burst(client, [first.url]) { await killed.value > 0 } }
            // Killed once a dozen sign-ins went through (each the browser's whole flow).
            let started = ContinuousClock.now
            var sessions = 0
            while sessions < 12, ContinuousClock.now - started < .seconds(60) {
                try await Task.sleep(for: .milliseconds(25))
                sessions =
                    (try? await DatabaseQueue(path: "\(folder)/a-data/gatehouse.sqlite").read { db in
                        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sessions") ?? 0
                    }) ?? 0
            }
            kill(first.process.pid, SIGKILL)
            await killed.increment()
            let done = await burst.value
            // Up to one sign-in per browser may have committed without its answer arriving.
            #expect(done >= 8 && sessions >= 12)
            _ = try await client.execute(OutboundRequest(method: "DELETE", url: "\(emulatorURL)/_emulator/faults"))

            let second = try await ServeProcess.start(
                name: "a", database: nil, emulatorURL: emulatorURL, key: key, folder: folder, extra: Self.receiver(emulatorURL))
            defer { second.process.stop() }
            let committed = try await DatabaseQueue(path: "\(folder)/a-data/gatehouse.sqlite").read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sessions") ?? -1
            }
            #expect(committed >= done, "every acknowledged sign-in has its session")
            // Failed attempts wait for their backoff.
            let delivered = try await Self.deliveries(client, emulatorURL, reaching: committed)
            #expect(delivered.count == committed, "one event per committed session: \(delivered.count) of \(committed)")
        }
    }

    @Test("three instances on PostgreSQL: the instance delivering is killed mid-burst, the others take its claims over after their lease")
    func killOneOfThreeOnPostgres() async throws {
        let database = try await PostgresTestServer.freshDatabase()
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        try await withEmulatorAndFolder("webhook-kill-pg") { emulatorURL, folder in
            let key = TokenVault.generateKey()
            func start(_ name: String) async throws -> ServeProcess {
                try await ServeProcess.start(
                    name: name, database: database, emulatorURL: emulatorURL, key: key, folder: folder, extra: Self.receiver(emulatorURL))
            }
            // The receiver answers slowly (300 ms), so deliveries are in flight when the kill comes.
            _ = try await client.execute(
                OutboundRequest(
                    method: "POST", url: "\(emulatorURL)/_emulator/faults", headers: ["Content-Type": "application/json"],
                    body: Array(#"{"endpoint":"POST /sample-app/webhooks","delayMs":300}"#.utf8)))
            // Alone at first, so every claim in flight is its own.
            let first = try await start("a")
            let stop = Counter()
            let burst = Task { await Self.burst(client, [first.url]) { await stop.value > 0 } }
            // Killed with deliveries in flight, once six sign-ins committed: up to one per browser
            // may have committed without its answer arriving, so at least two were acknowledged.
            let started = ContinuousClock.now
            var leased = 0
            var sessions = 0
            while leased < 4 || sessions < 6, ContinuousClock.now - started < .seconds(60) {
                try await Task.sleep(for: .milliseconds(20))
                sessions = try await PostgresTestServer.count(database, table: "sessions")
                leased = try await PostgresTestServer.count(database, table: "webhook_outbox", where: "lease_until > now()")
            }
            kill(first.process.pid, SIGKILL)
            #expect(leased >= 4 && sessions >= 6, "deliveries in flight at the kill")
            await stop.increment()
            let done = await burst.value
            #expect(done >= 2)
            // Two more instances, and the burst goes on against them.
            let others = [try await start("b"), try await start("c")]
            defer { for instance in others { instance.process.stop() } }
            let holds = await Self.burst(client, others.map(\.url), rounds: 5) { false } == 20
            #expect(holds)
            _ = try await client.execute(OutboundRequest(method: "DELETE", url: "\(emulatorURL)/_emulator/faults"))
            let committed = try await PostgresTestServer.count(database, table: "sessions")
            #expect(committed >= done)
            // The killed instance's claims are taken over once their lease (5 s + 5 s) passed.
            let delivered = try await Self.deliveries(client, emulatorURL, reaching: committed)
            #expect(delivered.count == committed, "at least once: \(delivered.count) of \(committed)")
        }
    }

    /// A count shared by the burst's tasks.
    actor Counter {
        private(set) var value = 0
        func increment() { value += 1 }
    }
}
