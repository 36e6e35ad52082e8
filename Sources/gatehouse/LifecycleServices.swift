import CurlClient
import GatehouseCore
import GatehousePostgres
import Logging
import ServiceLifecycle
import Synchronization

/// The PostgreSQL connection pool as a service. Listed first in the group, it stops last:
/// after the gateway has finished its requests in flight (a group stops in reverse order).
struct ConnectionPoolService: Service {
    /// The store whose pool this runs.
    let storage: PostgresStorage

    /// Runs the pool until the group shuts down (postgres-nio stops it on graceful shutdown).
    func run() async {
        await storage.runPool()
    }
}

/// The libcurl client's driver thread, stopped when the group shuts down — after the gateway,
/// which is listed after it — without blocking a thread while it ends.
struct HTTPClientService: Service {
    /// The client to stop.
    let client: CurlHTTPClient

    /// Waits for the shutdown, then stops the driver thread and waits for it to end.
    func run() async {
        // Cancellation (the group failing) ends the wait as well.
        try? await gracefulShutdown()
        await client.stop()
    }
}

/// A service that starts once the store is ready: `prepare` migrates it (and announces it to
/// the other services waiting), or waits for that announcement.
struct AfterStoreReady: Service {
    /// Migrates, or waits for the migration.
    let prepare: @Sendable () async throws -> Void
    /// What runs afterwards.
    let service: any Service

    /// `prepare`, then the service; a shutdown during `prepare` (a store that cannot be
    /// reached yet) cancels it and ends here, without starting the service.
    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await prepare() }
        } catch  where Task.isShuttingDownGracefully {
            return
        }
        try await service.run()
    }

    /// The service that migrates `storage` (then runs `verify`, which may refuse the start)
    /// before `service` starts, settling `ready` either way. A database that cannot be reached
    /// is waited for, with an error-level line naming it every few seconds (a shutdown ends the
    /// wait); any other failure stops the start.
    static func migrating(
        _ storage: any GatehouseStorage, ready: Eventual<Void>, logger: Logger, verify: @escaping @Sendable () async throws -> Void = {},
        then service: any Service
    ) -> AfterStoreReady {
        AfterStoreReady(prepare: { try await prepareStore(storage, ready: ready, logger: logger, verify: verify) }, service: service)
    }

    /// Waits for the store (an unreachable database: an error line naming it every 2 s, and
    /// `state` saying so), migrates it, runs `verify`, and settles `ready` either way.
    static func prepareStore(
        _ storage: any GatehouseStorage, ready: Eventual<Void>, logger: Logger, verify: @escaping @Sendable () async throws -> Void = {},
        state: StartupState = StartupState()
    ) async throws {
        do {
            while let postgres = storage as? PostgresStorage {
                do {
                    try await postgres.awaitReachable()
                    break
                } catch let error as PostgresStorageError where error.isUnreachable {
                    state.set("waiting for the database: \(error.description)")
                    logger.error("waiting for the database", metadata: ["reason": "\(error.description)"])
                    try await Task.sleep(for: .seconds(2))
                }
            }
            state.set("migrating the store")
            try await storage.migrate()
            state.set("checking the encryption key")
            try await verify()
            ready.set(())
        } catch {
            ready.fail(error)
            throw error
        }
    }

    /// The service that waits for `ready` before `service` starts.
    static func waiting(for ready: Eventual<Void>, then service: any Service) -> AfterStoreReady {
        AfterStoreReady(prepare: { try await ready.value() }, service: service)
    }
}

/// What a starting instance is doing, for its operations listener's `/readyz`.
final class StartupState: Sendable {
    private let text = Mutex("connecting to the store")

    /// The current step.
    var value: String { text.withLock { $0 } }

    /// Moves to `step`.
    func set(_ step: String) {
        text.withLock { $0 = step }
    }
}
