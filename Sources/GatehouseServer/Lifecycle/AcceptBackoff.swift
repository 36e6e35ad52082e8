import Foundation
import Logging
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// What a listener does when `accept` finds no descriptor left (`EMFILE`, `ENFILE`) or no
/// memory (`ENOBUFS`, `ENOMEM`): it pauses accepting for a moment and logs why, at most once
/// every 10 seconds.
///
/// NIO reports such an error down the listener's pipeline, where nothing logged it, and reads
/// again at once; the pause keeps accept from being retried in a tight loop while no descriptor
/// is free. The connections that could not be accepted wait in the listen backlog and are taken
/// once descriptors are free again.
enum AcceptBackoff {
    /// How long accepting pauses after such an error.
    static let pause = TimeAmount.milliseconds(50)

    /// The errors that say "not now" rather than "never".
    static let exhaustion: Set<CInt> = [EMFILE, ENFILE, ENOBUFS, ENOMEM]

    /// Puts NIO's `AcceptBackoffHandler` first in the listener's pipeline, with a provider that
    /// pauses on exhaustion and logs it. Other accept errors NIO keeps the listener open for
    /// (an aborted connection) are dropped there too: they concern one client only.
    static func install(on channel: any Channel, role: String, logger: Logger) async {
        try? await channel.eventLoop.submit {
            let log = ExhaustionLog(role: role, logger: logger)
            let handler = AcceptBackoffHandler(shouldForwardIOErrorCaught: false) { error in
                guard exhaustion.contains(error.errnoCode) else { return nil }
                log.record(error)
                return pause
            }
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        }.get()
    }

    /// The accept failures of one listener, logged at most every 10 seconds with their count.
    /// Used on the listener's event loop only.
    private final class ExhaustionLog {
        let role: String
        let logger: Logger
        var lastLogged: NIODeadline?
        var unlogged = 0

        init(role: String, logger: Logger) {
            self.role = role
            self.logger = logger
        }

        func record(_ error: IOError) {
            unlogged += 1
            let now = NIODeadline.now()
            if let lastLogged, now - lastLogged < .seconds(10) { return }
            var limit = rlimit()
            _ = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            logger.error(
                "cannot accept connections: \(String(cString: strerror(error.errnoCode))); new connections wait in the listen backlog (raise LimitNOFILE / ulimit -Hn if the limit is the cause)",
                metadata: [
                    "listener.role": "\(role)", "accept.failures": .stringConvertible(unlogged), "fd.limit": .stringConvertible(limit.rlim_cur),
                ])
            lastLogged = now
            unlogged = 0
        }
    }
}
