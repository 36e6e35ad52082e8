import Foundation
import Logging
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// What a listener does when `accept` finds no descriptor left (`EMFILE`, `ENFILE`) or no
/// memory (`ENOBUFS`, `ENOMEM`): it pauses accepting for a moment, counts the failure and logs
/// why, at most once every 10 seconds.
///
/// NIO reports such an error down the listener's pipeline, where nothing logged it, and keeps
/// the listening socket registered for reading: the connections waiting in the listen backlog
/// keep it readable, so accept would be retried in a tight loop that holds a core for as long as
/// no descriptor is free (tens of thousands of failures a second). NIO's `AcceptBackoffHandler`
/// does not stop that: it delays the next `read`, but the failed accept leaves the channel's
/// read pending, so the socket stays registered. The pause here turns the channel's auto-read
/// off, which takes the socket out of the event loop's interest set, and back on after it. The
/// connections that could not be accepted wait in the listen backlog and are taken once
/// descriptors are free again.
enum AcceptBackoff {
    /// How long accepting pauses after such an error.
    static let pause = TimeAmount.milliseconds(50)

    /// The errors that say "not now" rather than "never".
    static let exhaustion: Set<CInt> = [EMFILE, ENFILE, ENOBUFS, ENOMEM]

    /// Puts an `AcceptPause` first in the listener's pipeline, counting each failure into
    /// `metrics` and logging it. Other accept errors NIO keeps the listener open for (an
    /// aborted connection) are dropped there too: they concern one client only.
    static func install(on channel: any Channel, role: String, metrics: ListenerMetrics, logger: Logger) async {
        try? await channel.eventLoop.submit {
            let log = ExhaustionLog(role: role, logger: logger)
            let handler = AcceptPause(pause: pause) { error in
                metrics.acceptFailed(listener: role)
                log.record(error)
            }
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        }.get()
    }

    /// Pauses a listening channel's accepting for `pause` after each exhaustion error: auto-read
    /// off (NIO unregisters the socket from its event loop), every `read` held back meanwhile,
    /// then auto-read on again (NIO registers it and reads). Used on the listener's event loop
    /// only.
    final class AcceptPause: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = any Channel
        typealias OutboundIn = any Channel

        private let pause: TimeAmount
        private let failed: (IOError) -> Void
        private var resume: Scheduled<Void>?

        /// Pauses of `pause`; `failed` hears of each exhaustion error.
        init(pause: TimeAmount, failed: @escaping (IOError) -> Void) {
            self.pause = pause
            self.failed = failed
        }

        func read(context: ChannelHandlerContext) {
            // Held back while paused: the resume reads.
            guard resume == nil else { return }
            context.read()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            guard let error = error as? IOError else {
                context.fireErrorCaught(error)
                return
            }
            // Only exhaustion pauses; the rest (an aborted connection) concerns one client.
            guard exhaustion.contains(error.errnoCode) else { return }
            failed(error)
            guard resume == nil, let options = context.channel.syncOptions else { return }
            try? options.setOption(ChannelOptions.autoRead, value: false)
            resume = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: pause) { [self] in
                resume = nil
                guard context.channel.isActive else { return }
                try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            resume?.cancel()
            resume = nil
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            guard let resume else { return }
            resume.cancel()
            self.resume = nil
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        }
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
