import NIOCore
import NIOHTTP1

/// What HTTP/1.x asks of a server that Hummingbird's HTTP/1 channel leaves out, applied between
/// NIO's HTTP/1 decoder and its conversion to HTTP types, where the request's version is still
/// known:
///
/// - **A request that does not keep the connection alive** (HTTP/1.0 without
///   `Connection: keep-alive`, HTTP/1.1 with `Connection: close` in any case or list) reaches
///   Hummingbird with `Connection: close`, the one form it checks before closing the connection
///   after the answer (RFC 9112 §9.3). Without it an HTTP/1.0 client reading to the end of the
///   stream waited for the idle timeout.
/// - **`Expect: 100-continue`** is answered `100 Continue` before the request goes on, once no
///   earlier answer of the connection is still being written (RFC 9110 §10.1.1). Without it a
///   client that waits for the interim answer before sending its body waited for the idle
///   timeout, and curl paused every upload over 1 MiB for a second.
final class HTTP1Semantics: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Requests whose heads came and whose answers have not ended.
    private var unanswered = 0
    /// How many answers a waiting `100 Continue` follows; `nil` when none waits.
    private var answersBeforeContinue: Int?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        let answersBefore = unanswered
        unanswered += 1
        if head.version.major == 1, head.version.minor >= 1, Self.expectsContinue(head.headers) {
            if answersBefore == 0 {
                writeContinue(context: context)
            } else {
                answersBeforeContinue = answersBefore
            }
        }
        if !head.isKeepAlive, head.headers.first(name: "connection") != "close" {
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        context.write(data, promise: promise)
        unanswered = max(0, unanswered - 1)
        guard let waiting = answersBeforeContinue else { return }
        if waiting <= 1 {
            answersBeforeContinue = nil
            writeContinue(context: context)
        } else {
            answersBeforeContinue = waiting - 1
        }
    }

    private func writeContinue(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
    }

    /// Whether the fields hold `Expect: 100-continue` (its value compared without case).
    private static func expectsContinue(_ headers: HTTPHeaders) -> Bool {
        headers["expect"].contains { $0.lowercased() == "100-continue" }
    }
}
