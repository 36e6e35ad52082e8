import CurlClient
import Foundation
import GatehouseCore
import Glibc
import Testing

/// A gateway with webhooks does nothing between events: after a delivery its worker waits for
/// the next write or the poll interval. Measured on a `gatehouse serve` child process, whose
/// CPU time is its own.
@Suite("Webhooks at rest")
struct WebhookIdleTests {
    /// The user and system CPU time `pid` has used, in seconds (`/proc/PID/stat`).
    static func cpuSeconds(_ pid: pid_t) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The command name (field 2) is in parentheses and may hold spaces: count from after it.
        guard let close = stat.lastIndex(of: ")") else { throw FlowError("unreadable /proc/\(pid)/stat") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // Fields 14 and 15 of the whole line (utime, stime) are the 12th and 13th after the name.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw FlowError("unreadable /proc/\(pid)/stat")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("after a sign-in's event is delivered, the gateway stays idle: under half a second of CPU in three seconds")
    func idleAfterDelivery() async throws {
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        try await withEmulatorAndFolder("webhook-idle") { emulatorURL, folder in
            let gateway = try await ServeProcess.start(
                name: "idle", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: WebhookDurabilityTests.receiver(emulatorURL))
            defer { gateway.process.stop() }
            _ = try await headlessSignIn(client: client, gateway: gateway.url, returnTo: TestDeployment.returnTo, publicURL: ServeProcess.publicURL)
            let waiting = ContinuousClock.now
            while try await WebhookDurabilityTests.signedInEvents(client, emulatorURL).ids.isEmpty, ContinuousClock.now - waiting < .seconds(30) {
                try await Task.sleep(for: .milliseconds(100))
            }
            try #require(try await WebhookDurabilityTests.signedInEvents(client, emulatorURL).ids.count == 1, "the sign-in's event was delivered")
            // Nothing is left to deliver: what the process does now is waiting (and one outbox
            // poll a second). A worker that goes round without waiting burns a core.
            let before = try Self.cpuSeconds(gateway.process.pid)
            try await Task.sleep(for: .seconds(3))
            let used = try Self.cpuSeconds(gateway.process.pid) - before
            #expect(used < 0.5, "the idle gateway used \(used) s of CPU in 3 s\n\(gateway.logTail)")
        }
    }
}
