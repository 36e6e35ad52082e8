import Testing

@testable import CurlClient

/// The client's bound on transfers in flight: what waits, what is refused, what a wait costs.
@Suite("CurlHTTPClient transfer limit")
struct TransferLimitTests {
    /// How a call ended.
    enum Outcome: Equatable {
        case status(Int)
        case failed(OutboundError.Kind)
        case otherError
    }

    /// Starts a request in a task of its own.
    static func call(_ client: CurlHTTPClient, _ url: String, timeout: Duration? = nil) -> Task<Outcome, Never> {
        Task {
            do {
                return .status(try await client.execute(OutboundRequest(url: url, timeout: timeout)).status)
            } catch let error as OutboundError {
                return .failed(error.kind)
            } catch {
                return .otherError
            }
        }
    }

    @Test(
        "beyond maxTransfers a call waits without reaching the server, beyond the line it is refused at once; a cancelled or timed-out wait leaves, and a free slot starts the next"
    )
    func callsBeyondTheLimitWait() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(maxTransfers: 2, maxWaitingTransfers: 1))
            defer { client.shutdown() }
            let slow = [Self.call(client, server.url("/delay/20000")), Self.call(client, server.url("/delay/20000"))]
            let bothStarted = try await UploadTests.eventually { server.requestsSeen == 2 && client.load.inFlight == 2 }
            #expect(bothStarted)

            // The third waits: it never reaches the server while both slots are taken.
            let cancelled = Self.call(client, server.url("/hello"))
            let thirdWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(thirdWaits)
            #expect(server.requestsSeen == 2, "a call beyond the limit reached the server")
            // The line is full: the fourth is refused without waiting.
            let refused = await Self.call(client, server.url("/hello")).value
            #expect(refused == .failed(.overloaded))
            #expect(client.load == OutboundLoad(inFlight: 2, waiting: 1, refused: 1))

            // Cancelling a waiting call ends it and frees its place in line.
            cancelled.cancel()
            #expect(await cancelled.value == .failed(.cancelled))
            #expect(client.load.waiting == 0)

            // A waiting call's total timeout runs while it waits.
            let timedOut = await Self.call(client, server.url("/hello"), timeout: .milliseconds(300)).value
            #expect(timedOut == .failed(.timedOut))
            #expect(client.load.waiting == 0)

            // A slot that frees starts the first in line.
            let next = Self.call(client, server.url("/hello"))
            let nextWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(nextWaits)
            slow[0].cancel()
            #expect(await next.value == .status(200))
            #expect(await slow[0].value == .failed(.cancelled))
            slow[1].cancel()
            #expect(await slow[1].value == .failed(.cancelled))
            let allEnded = try await UploadTests.eventually { client.load.inFlight == 0 && client.load.waiting == 0 }
            #expect(allEnded)
            #expect(server.requestsSeen == 3)
        }
    }

    @Test("shutting the client down fails the calls waiting for a slot as cancelled")
    func shutdownFailsWaitingCalls() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(maxTransfers: 1, maxWaitingTransfers: 4))
            let slow = Self.call(client, server.url("/delay/20000"))
            let slowStarted = try await UploadTests.eventually { client.load.inFlight == 1 }
            #expect(slowStarted)
            let waiting = (0..<3).map { _ in Self.call(client, server.url("/hello")) }
            let threeWait = try await UploadTests.eventually { client.load.waiting == 3 }
            #expect(threeWait)
            await client.stop()
            for call in waiting {
                #expect(await call.value == .failed(.cancelled))
            }
            #expect(await slow.value == .failed(.cancelled))
            #expect(server.requestsSeen == 1)
        }
    }
}
