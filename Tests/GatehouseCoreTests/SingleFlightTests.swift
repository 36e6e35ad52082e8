import Synchronization
import Testing

@testable import GatehouseCore

/// The one single-flight type behind the caches, refreshes and JWKS fetches.
@Suite struct SingleFlightTests {
    /// Counts runs and holds each until released, so callers overlap without sleeping.
    final class Gate: Sendable {
        let runs = Mutex(0)
        let (released, release) = AsyncStream.makeStream(of: Void.self)

        func work(_ value: Int) async throws -> Int {
            runs.withLock { $0 += 1 }
            for await _ in released { break }
            return value
        }
    }

    /// Whether `task` ends while the test's run is still held: it did not wait for the run.
    /// Bounded, so that a caller that does wait fails the test instead of hanging it.
    static func ends(_ task: Task<Int, any Error>) async -> Bool {
        let ended = Mutex(false)
        Task {
            _ = await task.result
            ended.withLock { $0 = true }
        }
        for _ in 0..<100_000 where !ended.withLock({ $0 }) { await Task.yield() }
        return ended.withLock { $0 }
    }

    @Test("callers of one key share one run and its result; another key runs on its own; after the end a new run starts")
    func sharing() async throws {
        let flight = SingleFlight<String, Int>()
        let gate = Gate()
        let first = flight.task(for: "a") { try await gate.work(1) }
        let joined = (0..<10).map { _ in flight.task(for: "a") { try await gate.work(2) } }
        #expect(flight.isRunning("a"))
        let holds = joined.allSatisfy { $0 == first }
        #expect(holds)
        let other = Gate()
        let b = flight.task(for: "b") { try await other.work(3) }
        other.release.yield()
        #expect(try await b.value == 3)
        gate.release.yield()
        #expect(try await first.value == 1)
        for task in joined { #expect(try await task.value == 1) }
        let holds2 = gate.runs.withLock { $0 } == 1
        #expect(holds2)
        // The run forgot itself when it ended (its own task removes it).
        for _ in 0..<1000 where flight.isRunning("a") { await Task.yield() }
        #expect(!flight.isRunning("a"))
        let again = Gate()
        again.release.yield()
        let holds3 = try await flight.run("a") { try await again.work(4) } == 4
        #expect(holds3)
    }

    @Test("a cancelled caller stops waiting at once while the run goes on and answers the callers still waiting")
    func cancelledWaiter() async throws {
        let flight = SingleFlight<String, Int>()
        let gate = Gate()
        let run = flight.task(for: "k") { try await gate.work(5) }
        let cancelled = Task { try await flight.value(of: run) }
        let waiting = Task { try await flight.value(of: run) }
        cancelled.cancel()
        let answered = await Self.ends(cancelled)
        #expect(answered, "the cancelled caller is answered before the run ends")
        #expect(flight.isRunning("k"))
        gate.release.yield()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(try await waiting.value == 5)
        // Cancelled before it asked: it never waits.
        let late = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await flight.value(of: run)
        }
        await #expect(throws: CancellationError.self) { try await late.value }
    }

    @Test(
        "run (a token refresh, a data-key reread) answers a cancelled caller at once, also the one that started the run, which goes on for the others"
    )
    func cancelledRunCaller() async throws {
        let flight = SingleFlight<String, Int>()
        let gate = Gate()
        let starter = Task { try await flight.run("k") { try await gate.work(6) } }
        for _ in 0..<100_000 where !flight.isRunning("k") { await Task.yield() }
        // Joined now, while the run is held: the run itself, not a new one.
        let joined = flight.task(for: "k") { 0 }
        starter.cancel()
        let answered = await Self.ends(starter)
        #expect(answered, "the cancelled caller is answered before the run ends")
        #expect(flight.isRunning("k"))
        gate.release.yield()
        await #expect(throws: CancellationError.self) { try await starter.value }
        #expect(try await joined.value == 6)
    }

    @Test("an error is shared by every caller of the run, and the next call starts afresh")
    func errors() async throws {
        struct Failure: Error {}
        let flight = SingleFlight<String, Int>()
        let gate = Gate()
        let failing = flight.task(for: "k") {
            _ = try await gate.work(0)
            throw Failure()
        }
        let joined = flight.task(for: "k") { 7 }
        gate.release.yield()
        await #expect(throws: Failure.self) { try await failing.value }
        await #expect(throws: Failure.self) { try await joined.value }
        for _ in 0..<1000 where flight.isRunning("k") { await Task.yield() }
        let holds = try await flight.run("k") { 8 } == 8
        #expect(holds)
    }
}
