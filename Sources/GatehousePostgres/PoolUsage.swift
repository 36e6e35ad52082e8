import CoreMetrics
import Synchronization

/// How busy the connection pool is, as two gauges: operations holding a connection and
/// operations waiting for one. postgres-nio keeps its pool's counts to itself, so they are
/// derived from the store's operations in flight: each holds one of the pool's connections or,
/// beyond `maximumConnections`, waits for one (a connection being opened counts as held).
final class PoolUsage: Sendable {
    /// The pool's size.
    let maximumConnections: Int
    private let inFlight = Atomic<Int>(0)
    private let inUse: Gauge
    private let waiting: Gauge

    /// Gauges for a pool of this size in `factory`'s registry (the maximum published once).
    init(maximumConnections: Int, factory: any MetricsFactory) {
        self.maximumConnections = maximumConnections
        inUse = Gauge(label: "gatehouse_database_pool_connections_in_use", dimensions: [], factory: factory)
        waiting = Gauge(label: "gatehouse_database_pool_operations_waiting", dimensions: [], factory: factory)
        Gauge(label: "gatehouse_database_pool_connections_max", dimensions: [], factory: factory).record(maximumConnections)
        publish(0)
    }

    /// Runs one database operation, counted while it runs.
    func counting<T>(_ operation: () async throws -> T) async rethrows -> T {
        publish(inFlight.add(1, ordering: .relaxed).newValue)
        defer { publish(inFlight.subtract(1, ordering: .relaxed).newValue) }
        return try await operation()
    }

    private func publish(_ operations: Int) {
        inUse.record(min(operations, maximumConnections))
        waiting.record(max(0, operations - maximumConnections))
    }
}
