import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose client is too slow to be told apart from one that holds it on
/// purpose, in the two ways Hummingbird's idle timeout lets through:
///
/// - **A request body that trickles.** The idle timeout starts again at every part of a body,
///   so one byte per timeout would hold a connection for ever (also after the answer, while
///   Hummingbird drains the rest of the body). A body must arrive within the timeout of its
///   head plus one second per `minimumBodyRate` bytes that came: a client sending at least
///   that rate never meets the deadline, a trickle meets it one timeout after its head.
/// - **An answer nobody reads.** A writer waits for the channel to become writable again, for
///   ever if the client stops reading. A channel that stays unwritable (NIO's high-water mark
///   of queued bytes, 64 KB) for the timeout is closed.
///
/// Requests that arrive whole in one read (every `GET`) schedule nothing: the body deadline is
/// armed at the end of a read that left a request incomplete.
final class SlowClientDeadlines: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// Bytes per second a request body must keep up after the first timeout: 500, as Apache's
    /// `mod_reqtimeout` asks by default.
    static let minimumBodyRate = 500

    private let timeout: TimeAmount
    /// Whether a request's head came and its end has not.
    private var readingRequest = false
    /// When the incomplete request was first seen at the end of a read.
    private var requestStarted: NIODeadline?
    /// Body bytes of the incomplete request so far.
    private var bodyBytes = 0
    private var bodyCheck: Scheduled<Void>?
    private var writeCheck: Scheduled<Void>?

    /// Deadlines of `timeout` (the listener's idle timeout).
    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            readingRequest = true
            bodyBytes = 0
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
        case .end:
            readingRequest = false
            requestStarted = nil
            bodyCheck?.cancel()
            bodyCheck = nil
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if readingRequest, bodyCheck == nil {
            let started = requestStarted ?? .now()
            requestStarted = started
            scheduleBodyCheck(context: context, at: bodyDeadline(started))
        }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            writeCheck?.cancel()
            writeCheck = nil
        } else if writeCheck == nil {
            writeCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: timeout) { [self] in
                writeCheck = nil
                if !context.channel.isWritable { context.close(promise: nil) }
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelChecks()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelChecks()
    }

    private func bodyDeadline(_ started: NIODeadline) -> NIODeadline {
        started + timeout + .nanoseconds(Int64(bodyBytes) * 1_000_000_000 / Int64(Self.minimumBodyRate))
    }

    private func scheduleBodyCheck(context: ChannelHandlerContext, at deadline: NIODeadline) {
        bodyCheck = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: deadline) { [self] in
            bodyCheck = nil
            guard readingRequest, let started = requestStarted else { return }
            let deadline = bodyDeadline(started)
            if deadline <= .now() {
                context.close(promise: nil)
            } else {
                scheduleBodyCheck(context: context, at: deadline)
            }
        }
    }

    private func cancelChecks() {
        bodyCheck?.cancel()
        bodyCheck = nil
        writeCheck?.cancel()
        writeCheck = nil
    }
}
