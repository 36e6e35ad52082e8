import Synchronization
import Testing

@testable import GatehouseServer

/// The public `/readyz`'s shared verdict: one evaluation for concurrent callers, kept for its
/// lifetime, then evaluated again.
@Suite("Shared verdict")
struct SharedVerdictTests {
    @Test("twenty concurrent callers share one evaluation; the verdict is kept for its lifetime, then evaluated again")
    func oneEvaluationPerLifetime() async throws {
        let start = ContinuousClock.now
        let offset = Mutex(Duration.zero)
        let verdicts = SharedVerdict(lifetime: .seconds(1)) { start + offset.withLock { $0 } }
        let evaluations = Counter()
        let evaluate: @Sendable () async -> Bool = {
            evaluations.count.withLock { $0 += 1 }
            // Callers that arrive meanwhile wait for this evaluation; later ones find its
            // verdict kept (the clock stands still until the test moves it).
            try? await Task.sleep(for: .milliseconds(200))
            return true
        }
        let answers = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<20 { group.addTask { await verdicts.verdict(evaluate) } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        let allReady = answers.count == 20 && !answers.contains(false)
        #expect(allReady)
        #expect(evaluations.value == 1)
        offset.withLock { $0 = .milliseconds(900) }
        #expect(await verdicts.verdict(evaluate))
        #expect(evaluations.value == 1, "still fresh")
        offset.withLock { $0 = .milliseconds(1_300) }
        #expect(await verdicts.verdict(evaluate))
        #expect(evaluations.value == 2)
    }

    /// How many times a verdict was evaluated.
    final class Counter: Sendable {
        let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
    }
}
