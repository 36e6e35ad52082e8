import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

/// Bounds how long the process takes to stop after `SIGTERM`/`SIGINT`: the drain
/// (`GATEHOUSE_SHUTDOWN_DELAY`, seconds readiness answers 503 while the listener still
/// serves; default 5 for `serve`, 0 for `demo`) plus `GATEHOUSE_SHUTDOWN_TIMEOUT` (seconds the
/// requests in flight then have; default 20), 25 s in all: inside Kubernetes' 30 s grace period.
///
/// The service group is given the timeout as its graceful-shutdown limit, after which it
/// cancels the services. That is not always enough: work stuck in a call that ignores
/// cancellation (a connection broken mid-query after a database crash) would keep the
/// process alive forever, and an orchestrator would wait until its own kill. So one second
/// past the limit a thread outside Swift's cooperative pool logs what happened and ends the
/// process.
struct ShutdownDeadline: Service {
    /// The graceful-shutdown limit.
    let timeout: Duration
    let logger: Logger

    /// Reads `GATEHOUSE_SHUTDOWN_TIMEOUT` (its range and default are the settings catalog's).
    static func timeout(_ environment: [String: String]) throws -> Duration {
        try TypedSettings(environment: environment).durationOrDefault("GATEHOUSE_SHUTDOWN_TIMEOUT")
    }

    /// Reads `GATEHOUSE_SHUTDOWN_DELAY` (`fallback` seconds when unset).
    static func delay(_ environment: [String: String], default fallback: Double) throws -> Duration {
        try TypedSettings(environment: environment).duration("GATEHOUSE_SHUTDOWN_DELAY") ?? .milliseconds(Int(fallback * 1000))
    }

    /// The service group for `services`, stopping on `SIGTERM`, `SIGINT` or `SIGHUP` within
    /// `timeout` (the drain's delay included: pass both). `SIGHUP` (a closed terminal, a
    /// supervisor's reload) drains like `SIGTERM` instead of ending the process at once: the
    /// settings are read at start, so a restart is how they change.
    static func group(services: [any Service], timeout: Duration, logger: Logger) -> ServiceGroup {
        // Last, so it is the first told of the shutdown; its return (once armed) ends nothing.
        let deadline = ServiceGroupConfiguration.ServiceConfiguration(
            service: ShutdownDeadline(timeout: timeout, logger: logger), successTerminationBehavior: .ignore)
        var configuration = ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) } + [deadline],
            gracefulShutdownSignals: [.sigterm, .sigint, .sighup], logger: logger)
        configuration.maximumGracefulShutdownDuration = timeout
        return ServiceGroup(configuration: configuration)
    }

    /// Waits for the shutdown to begin, then arms the deadline.
    func run() async throws {
        try? await gracefulShutdown()
        let limit = timeout + .seconds(1)
        let logger = self.logger
        let thread = Thread {
            Thread.sleep(forTimeInterval: Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18)
            logger.error("shutdown did not finish in time; exiting", metadata: ["shutdown.timeout": "\(timeout)"])
            exit(0)
        }
        thread.start()
    }
}
