import Logging
import ServiceLifecycle
import Synchronization

/// Whether this instance is shutting down: from that moment `/readyz` answers `503`, so that
/// load balancers stop sending it new requests while it still serves them.
public final class DrainSignal: Sendable {
    private let draining = Atomic<Bool>(false)
    private let serving = Atomic<Bool>(false)

    /// Not draining yet.
    public init() {}

    /// Whether the shutdown has begun.
    public var isDraining: Bool { draining.load(ordering: .relaxed) }

    func begin() { draining.store(true, ordering: .relaxed) }

    /// Whether the public listener has started: before it, no load balancer sends anything
    /// and there is nothing to drain.
    public var isServing: Bool { serving.load(ordering: .relaxed) }

    /// Records that the public listener is accepting connections.
    public func markServing() { serving.store(true, ordering: .relaxed) }
}

/// The drain before a gateway stops: told of the graceful shutdown before the gateway is
/// (list it after the gateway: a service group shuts its services down in reverse order, one
/// after the other), it flips readiness to `503` at once (`signal`) and returns only `delay`
/// later, so the listener keeps accepting and serving while load balancers notice; then the
/// gateway stops accepting and lets the requests in flight finish, within the service group's
/// graceful-shutdown limit (which should allow `delay` more).
public struct DrainingService: Service {
    let signal: DrainSignal
    let delay: Duration
    let logger: Logger

    /// A drain of `delay` for the gateway whose assembly's `/readyz` reads `signal`.
    public init(signal: DrainSignal, delay: Duration, logger: Logger) {
        self.signal = signal
        self.delay = delay
        self.logger = logger
    }

    /// Waits for the graceful shutdown, then drains.
    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            return  // cancelled before any shutdown began
        }
        signal.begin()
        guard signal.isServing else {
            // Stopped while starting (the store not migrated yet, say): nothing to drain.
            logger.info("shutting down before serving")
            return
        }
        logger.info(
            "shutting down: readiness answers 503, still serving",
            metadata: ["shutdown.delay": .stringConvertible(Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)])
        try? await Task.sleep(for: delay)
        logger.info("shutting down: no new connections; finishing the requests in flight")
    }
}
