/// Runs the suite's CPU-heaviest tests one at a time. Swift Testing runs every suite in
/// parallel; on a 2-core machine two of these at once (20 simultaneous sign-ins with debug
/// crypto, two gateway processes under refresh load across database crashes, a latency
/// comparison) starve each other past their timeouts. Everything else still runs beside them.
public actor HeavyTests {
    /// The one gate of the test process.
    public static let gate = HeavyTests()

    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// `body`, once no other heavy test runs; the gate opens again whether it returns or throws.
    public func exclusive<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer { handOver() }
        return try await body()
    }

    private func handOver() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
