import CurlClient
import Foundation
import GatehouseTestSupport
import Synchronization
import Testing

/// Stopping an in-process server while clients connect to it.
@Suite("In-process servers stop under connecting clients")
struct ServerStopTests {
    /// Whether the connecting clients should stop, and how many connections they opened.
    final class Clients: Sendable {
        let stop = Atomic<Bool>(false)
        let opened = Atomic<Int>(0)
    }

    @Test(
        "ten times, the emulator stops while two clients open a connection every millisecond, and the test process goes on: a cancelled serving task with an accepted connection not yet served would trap it"
    )
    func stopsWhileClientsConnect() async throws {
        for _ in 0..<10 {
            let clients = Clients()
            var connecting: [Task<Void, any Error>] = []
            try await withEmulator { baseURL, _ in
                let port = try #require(Int(baseURL.split(separator: ":").last ?? ""))
                for _ in 0..<2 {
                    connecting.append(
                        Task {
                            try await LoopbackSocket.offPool {
                                // Bounded: at most 100,000 attempts, ending when the test says so;
                                // paced, so that the test does not take the machine from the others.
                                for _ in 0..<100_000 where !clients.stop.load(ordering: .relaxed) {
                                    usleep(1000)
                                    guard let socket = try? LoopbackSocket.connect(port: port) else { continue }
                                    clients.opened.add(1, ordering: .relaxed)
                                    try? socket.send("GET /.well-known/openid-configuration HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                                    socket.close()
                                }
                            }
                        })
                }
                // The server stops while the clients still connect.
                for _ in 0..<500 where clients.opened.load(ordering: .relaxed) < 20 {
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            clients.stop.store(true, ordering: .relaxed)
            for task in connecting { try await task.value }
            #expect(clients.opened.load(ordering: .relaxed) >= 20)
        }
    }
}
