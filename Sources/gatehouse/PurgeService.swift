import GatehouseCore
import ServiceLifecycle

/// Runs the expired-records purger for as long as the process serves, stopping on graceful shutdown.
struct PurgeService: Service {
    /// The purger to run.
    let purger: ExpiredRecordsPurger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await purger.run()
        }
    }
}
