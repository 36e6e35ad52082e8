import Logging
import ServiceLifecycle
import Synchronization

/// Runs `service` (an in-process server) for `body`, then stops it with a graceful shutdown,
/// never by cancelling its task: a Hummingbird server whose serving task is cancelled while a
/// connection it accepted is still waiting to be served traps the whole test process
/// ("Deinited NIOAsyncWriter without calling finish()", apple/swift-nio#3481). The graceful
/// stop lets requests in flight end, which on a loaded machine took more than 10 s. One that
/// takes longer than `stopLimit` (a request the test left held) fails the test and leaves the
/// server running, rather than crash the process or hang the suite.
public func withRunningService<T>(
    _ service: some Service, logger: Logger, stopLimit: Duration = .seconds(120), _ body: () async throws -> T
) async throws -> T {
    let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [], logger: logger))
    let stopped = Stopped()
    Task {
        defer { stopped.flag.store(true, ordering: .releasing) }
        try await group.run()
    }
    let outcome: Result<T, any Error>
    do {
        outcome = .success(try await body())
    } catch {
        outcome = .failure(error)
    }
    await group.triggerGracefulShutdown()
    let deadline = ContinuousClock.now + stopLimit
    while !stopped.flag.load(ordering: .acquiring) {
        guard ContinuousClock.now < deadline else { throw ServiceStopTimeout(limit: stopLimit) }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try outcome.get()
}

/// Whether a service's run has ended.
private final class Stopped: Sendable {
    let flag = Atomic<Bool>(false)
}

/// A service that did not stop within its limit after a graceful shutdown.
public struct ServiceStopTimeout: Error, CustomStringConvertible {
    /// How long the stop was given.
    public let limit: Duration
    /// What the failure says.
    public var description: String { "the in-process server did not stop within \(limit) of its graceful shutdown" }
}
