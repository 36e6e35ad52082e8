import Foundation
import Logging
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// When a listener accepts: not while it holds its limit of open connections
/// (`ConnectionLimit`), and not for a moment after `accept` found no descriptor left
/// (`EMFILE`, `ENFILE`), or a connection it accepted took the last one, or it found no memory
/// (`ENOBUFS`, `ENOMEM`). Either way the connections that arrive meanwhile wait in the listen
/// backlog and are taken once accepting resumes. Out of descriptors, the listener gives back
/// the one it keeps in reserve (`DescriptorReserve`), without which the Swift runtime stops
/// the process, and accepts again only once it holds the reserve with another one free.
///
/// Accepting stops by turning the listening channel's auto-read off, which takes the socket
/// out of the event loop's interest set, and resumes by turning it back on. Holding back
/// `read` alone would not do: NIO reports an accept error down the listener's pipeline, where
/// nothing logged it, and a failed accept leaves the channel's read pending, so the socket
/// stays registered and the connections in the backlog keep it readable. Accept would then be
/// retried in a tight loop that holds a core for as long as no descriptor is free (tens of
/// thousands of failures a second); NIO's `AcceptBackoffHandler` only delays the next `read`.
enum AcceptGate {
    /// How long accepting pauses after an exhaustion error.
    static let pause = TimeAmount.milliseconds(50)

    /// The errors that say "not now" rather than "never".
    static let exhaustion: Set<CInt> = [EMFILE, ENFILE, ENOBUFS, ENOMEM]

    /// Puts a `Gate` holding `limit` connections first in the listener's pipeline, counting
    /// into `metrics` and logging each reason it stops accepting. Other accept errors NIO keeps
    /// the listener open for (an aborted connection) are dropped there too: they concern one
    /// client only.
    static func install(on channel: any Channel, role: String, limit: Int, metrics: ListenerMetrics, logger: Logger) async {
        metrics.limit(listener: role, connections: limit)
        try? await channel.eventLoop.submit {
            let exhausted = ThrottledLog(logger: logger) { error, count in
                var descriptors = rlimit()
                _ = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &descriptors)
                return (
                    "cannot accept connections: \(String(cString: strerror(error))); new connections wait in the listen backlog (raise LimitNOFILE / ulimit -Hn if the limit is the cause)",
                    [
                        "listener.role": "\(role)", "accept.failures": .stringConvertible(count),
                        "fd.limit": .stringConvertible(descriptors.rlim_cur),
                    ]
                )
            }
            let full = ThrottledLog(logger: logger) { (_: CInt, count) in
                (
                    "connection limit reached: new connections wait in the listen backlog until open ones close",
                    ["listener.role": "\(role)", "connections.max": .stringConvertible(limit), "limit.reached": .stringConvertible(count)]
                )
            }
            let handler = Gate(
                limit: limit, pause: pause,
                events: Gate.Events(
                    failed: { error in
                        metrics.acceptFailed(listener: role)
                        exhausted.record(error.errnoCode, level: .error)
                    },
                    open: { metrics.connections(listener: role, open: $0) },
                    full: {
                        metrics.limitReached(listener: role)
                        full.record(0, level: .warning)
                    }))
            // One accept per read: NIO goes on accepting within a read after auto-read is
            // turned off, and would hand the next connection the descriptor the gate has just
            // given back to the process.
            try channel.syncOptions?.setOption(ChannelOptions.maxMessagesPerRead, value: 1)
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        }.get()
    }

    /// Counts a listening channel's open connections and stops accepting while there are
    /// `limit` of them, or for `pause` after each exhaustion error (and then for as long as its
    /// descriptor reserve cannot be held with one to spare): auto-read off (NIO unregisters the
    /// socket from its event loop), every `read` held back meanwhile, then auto-read on again
    /// (NIO registers it and reads). The listener accepts one connection a read
    /// (`install`), so the count never passes the limit. Used on the listener's event loop
    /// only.
    final class Gate: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = any Channel
        typealias OutboundIn = any Channel

        /// What the gate reports: an exhaustion error, the open connections after each change,
        /// and each time the count reaches the limit.
        struct Events {
            let failed: (IOError) -> Void
            let open: (Int) -> Void
            let full: () -> Void
        }

        private let limit: Int
        private let pause: TimeAmount
        private let events: Events
        private var resume: Scheduled<Void>?
        private var open = 0
        private var context: ChannelHandlerContext?
        private var reserve = DescriptorReserve()

        /// A gate holding `limit` connections, with pauses of `pause`.
        init(limit: Int, pause: TimeAmount, events: Events) {
            precondition(limit >= 1, "a listener that may hold no connection would never accept")
            self.limit = limit
            self.pause = pause
            self.events = events
        }

        private var accepting: Bool { resume == nil && open < limit }

        func handlerAdded(context: ChannelHandlerContext) {
            self.context = context
            _ = reserve.holdWithOneToSpare()
        }

        func read(context: ChannelHandlerContext) {
            // Held back while closed: turning auto-read on again reads.
            guard accepting else { return }
            context.read()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let connection = unwrapInboundIn(data)
            open += 1
            events.open(open)
            // Closed on its own event loop; counted on the listener's.
            let gate = NIOLoopBound(self, eventLoop: context.eventLoop)
            let loop = context.eventLoop
            connection.closeFuture.whenComplete { _ in
                loop.execute { gate.value.closed() }
            }
            if open == limit {
                events.full()
                updateAutoRead()
            }
            // The connection may have taken the last descriptor without an accept failing
            // after it (an empty backlog): the reserve goes back to the process at once.
            if resume == nil && !reserve.holdWithOneToSpare() {
                events.failed(IOError(errnoCode: EMFILE, reason: "accept"))
                pauseAccepting(context: context)
            }
            context.fireChannelRead(data)
        }

        private func closed() {
            open -= 1
            events.open(open)
            if open == limit - 1 { updateAutoRead() }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            guard let error = error as? IOError else {
                context.fireErrorCaught(error)
                return
            }
            // Only exhaustion pauses; the rest (an aborted connection) concerns one client.
            guard exhaustion.contains(error.errnoCode) else { return }
            events.failed(error)
            if error.errnoCode == EMFILE || error.errnoCode == ENFILE { reserve.release() }
            pauseAccepting(context: context)
        }

        /// Stops accepting for `pause`, then accepts again if the reserve can be held with a
        /// descriptor to spare, else pauses once more.
        private func pauseAccepting(context: ChannelHandlerContext) {
            guard resume == nil else { return }
            resume = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: pause) { [self] in
                resume = nil
                if reserve.holdWithOneToSpare() {
                    updateAutoRead()
                } else if let context = self.context {
                    pauseAccepting(context: context)
                }
            }
            updateAutoRead()
        }

        /// Auto-read on while accepting, off otherwise.
        private func updateAutoRead() {
            guard let context, context.channel.isActive, let options = context.channel.syncOptions else { return }
            try? options.setOption(ChannelOptions.autoRead, value: accepting)
        }

        func channelInactive(context: ChannelHandlerContext) {
            resume?.cancel()
            resume = nil
            reserve.release()
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            resume?.cancel()
            resume = nil
            reserve.release()
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
            self.context = nil
        }
    }

    /// Events of one kind, logged at most every 10 seconds with their count since the last
    /// line. Used on the listener's event loop only.
    private final class ThrottledLog {
        let logger: Logger
        let line: (CInt, Int) -> (Logger.Message, Logger.Metadata)
        var lastLogged: NIODeadline?
        var unlogged = 0

        init(logger: Logger, line: @escaping (CInt, Int) -> (Logger.Message, Logger.Metadata)) {
            self.logger = logger
            self.line = line
        }

        func record(_ code: CInt, level: Logger.Level) {
            unlogged += 1
            let now = NIODeadline.now()
            if let lastLogged, now - lastLogged < .seconds(10) { return }
            let (message, metadata) = line(code, unlogged)
            logger.log(level: level, message, metadata: metadata)
            lastLogged = now
            unlogged = 0
        }
    }
}
