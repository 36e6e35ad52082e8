import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose client is too slow to be told apart from one that holds it on
/// purpose, in the ways Hummingbird's idle timeout lets through:
///
/// - **A request body that trickles.** The idle timeout starts again at every part of a body,
///   so one byte per timeout would hold a connection for ever (also after the answer, while
///   Hummingbird drains the rest of the body). A body must arrive within the timeout of its
///   head plus one second per `minimumBodyRate` bytes that came: a client that has sent at
///   least that rate never meets the deadline, a trickle meets it one timeout after its head.
/// - **An answer nobody reads.** A writer waits for the channel to become writable again, for
///   ever if the client stops reading. A channel that stays unwritable (more than NIO's
///   high-water mark of 64 KB queued) is closed when none of what it queued went to the socket
///   for the timeout.
/// - **A request that stops the parser.** After a `CONNECT` or an `Upgrade` request, NIO's
///   decoder parses nothing more and keeps every byte that follows until the connection
///   closes. Gatehouse upgrades nothing: such a connection closes once its answer is written.
///
/// Requests that arrive whole in one read (every `GET`) schedule nothing: the body deadline is
/// armed at the end of a read that left a request incomplete.
final class SlowClientDeadlines: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Why a connection was cut, as `gatehouse_connections_cut_total` labels it.
    enum Reason: String, Sendable, CaseIterable {
        /// A request body fell behind its deadline.
        case slowBody = "slow-body"
        /// The socket took none of a queued answer for the timeout.
        case unreadAnswer = "unread-answer"
        /// A `CONNECT` or `Upgrade` request was answered.
        case upgrade
    }

    /// Bytes per second a request body must keep up after the first timeout: 500, as Apache's
    /// `mod_reqtimeout` asks by default.
    static let minimumBodyRate = 500

    private let timeout: TimeAmount
    /// Told of each connection this handler closes, before it closes.
    private let cut: @Sendable (Reason) -> Void
    /// Whether a request's head came and its end has not.
    private var readingRequest = false
    /// When the incomplete request was first seen at the end of a read.
    private var requestStarted: NIODeadline?
    /// Body bytes of the incomplete request so far.
    private var bodyBytes = 0
    /// Whether a request stopped the decoder: the connection closes after the answer.
    private var closeAfterAnswer = false
    private var bodyCheck: Scheduled<Void>?
    private var writeCheck: Scheduled<Void>?
    /// Bumped whenever the check of their kind is cancelled: NIO may still run a task cancelled
    /// by another task of the same turn of the loop, and that run must do nothing.
    private var bodyGeneration = 0
    private var writeGeneration = 0
    /// Bytes the channel had queued at the last check of an unwritable channel.
    private var queuedAtCheck = 0

    /// Deadlines of `timeout` (the listener's idle timeout); `cut` hears of each connection
    /// closed, and why.
    init(timeout: TimeAmount, cut: @escaping @Sendable (Reason) -> Void = { _ in }) {
        self.timeout = timeout
        self.cut = cut
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            readingRequest = true
            bodyBytes = 0
            if head.method == .connect || head.headerFields[.upgrade] != nil { closeAfterAnswer = true }
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
        case .end:
            readingRequest = false
            requestStarted = nil
            cancelBodyCheck()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard closeAfterAnswer, case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        context.writeAndFlush(data, promise: promise)
        cut(.upgrade)
        context.close(promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if readingRequest, bodyCheck == nil {
            let started = requestStarted ?? context.eventLoop.now
            requestStarted = started
            scheduleBodyCheck(context: context, at: bodyDeadline(started))
        }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            cancelWriteCheck()
        } else if writeCheck == nil {
            queuedAtCheck = Self.queuedBytes(context)
            scheduleWriteCheck(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelBodyCheck()
        cancelWriteCheck()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelBodyCheck()
        cancelWriteCheck()
    }

    private func bodyDeadline(_ started: NIODeadline) -> NIODeadline {
        // Capped so that the product cannot overflow (a body drained at wire speed grows
        // without bound); 2^40 bytes are 69 years at the minimum rate.
        let seconds = Int64(min(bodyBytes, 1 << 40) / Self.minimumBodyRate)
        return started + timeout + .seconds(seconds)
    }

    private func scheduleBodyCheck(context: ChannelHandlerContext, at deadline: NIODeadline) {
        let scheduled = bodyGeneration
        bodyCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            guard scheduled == bodyGeneration, context.channel.isActive else { return }
            bodyCheck = nil
            guard readingRequest, let started = requestStarted else { return }
            let deadline = bodyDeadline(started)
            if deadline <= context.eventLoop.now {
                cut(.slowBody)
                context.close(promise: nil)
            } else {
                scheduleBodyCheck(context: context, at: deadline)
            }
        }
    }

    private func scheduleWriteCheck(context: ChannelHandlerContext) {
        let scheduled = writeGeneration
        writeCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: timeout) { [self] in
            guard scheduled == writeGeneration, context.channel.isActive else { return }
            writeCheck = nil
            guard !context.channel.isWritable else { return }
            let queued = Self.queuedBytes(context)
            // A writer waiting for writability adds nothing, so fewer queued bytes mean the
            // socket took some.
            if queued < queuedAtCheck {
                queuedAtCheck = queued
                scheduleWriteCheck(context: context)
            } else {
                cut(.unreadAnswer)
                context.close(promise: nil)
            }
        }
    }

    /// The bytes written to the channel that have not gone to its socket yet.
    private static func queuedBytes(_ context: ChannelHandlerContext) -> Int {
        (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    private func cancelBodyCheck() {
        guard let check = bodyCheck else { return }
        check.cancel()
        bodyCheck = nil
        bodyGeneration &+= 1
    }

    private func cancelWriteCheck() {
        guard let check = writeCheck else { return }
        check.cancel()
        writeCheck = nil
        writeGeneration &+= 1
    }
}
