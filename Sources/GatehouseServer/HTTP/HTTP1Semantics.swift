import Foundation
import GatehouseCore
import NIOCore
import NIOHTTP1

/// What HTTP/1.x asks of a server that Hummingbird's HTTP/1 channel leaves out, applied between
/// NIO's HTTP/1 decoder and its conversion to HTTP types, where the request's version is still
/// known:
///
/// - **A request that does not keep the connection alive** (HTTP/1.0 without
///   `Connection: keep-alive`, HTTP/1.1 with `Connection: close` in any case or list) reaches
///   Hummingbird with `Connection: close`, the one form it checks before closing the connection
///   after the answer (RFC 9112 §9.3), and its answer carries `Connection: close` (§9.6).
///   Without it an HTTP/1.0 client reading to the end of the stream would wait for the idle
///   timeout.
/// - **A request whose head is over 8 KB** (`keptHeadLimit`, each field counted for what
///   keeping it costs, `size(of:)`) closes its connection after its answer the
///   same way: Hummingbird keeps a connection's last head until the next one comes, so an
///   idle connection would hold it. A 60 KB head left its connection holding about 116 KB
///   while idle, against 22.5 KB after a short one; a client that sends such heads opens a
///   connection per request instead. `largeHead` hears of each such head whose client would
///   have kept the connection open (the listener counts them), so an operator sees clients
///   whose cookies or tokens cost them keep-alive.
/// - **Nothing after a request that closes the connection** is passed on or answered, nor
///   read (RFC 9112 §9.6). NIO's parser refuses what follows a client's `Connection: close`
///   but not what follows a head closed here, and Hummingbird counts each such head as a
///   request in progress, which keeps the connection open past its idle timeout. When the
///   answer that closes the connection is out before its request's body, the connection
///   closes once the answer is sent: nothing would read the rest.
/// - **`Expect: 100-continue`** is answered `100 Continue` before the request goes on, once no
///   earlier answer of the connection is still being written (RFC 9110 §10.1.1). Without it a
///   client that waits for the interim answer before sending its body would wait for the idle
///   timeout, and curl pauses every upload over 1 MiB for a second.
/// - **A request head that is not HTTP** (a head over the size limit, a byte no header may
///   hold, conflicting lengths) is answered `400 invalid-argument` with a problem document and
///   its own request id, after the answers to the requests before it, and the connection
///   closed; `rejected` hears of it first (the listener logs and counts it). Hummingbird alone
///   answers a bare `400` with no body that nothing logs or counts. An error inside a
///   request's body (a chunk size that is not a number) goes on to the route reading it; after
///   the route has answered without reading the body, the connection closes instead, once the
///   answer is sent.
final class HTTP1Semantics: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Requests whose heads came and whose answers have not ended.
    private var unanswered = 0
    /// How many answers a waiting `100 Continue` follows; `nil` when none waits.
    private var answersBeforeContinue: Int?
    /// How many answers come before the one after which the connection closes, whose head
    /// gets `Connection: close`; `nil` when no request closes it.
    private var answersBeforeClose: Int?
    /// Whether the whole request that closes the connection has come: what follows is dropped.
    private var closed = false
    /// Whether a request's head came and its end has not: a parser error then is its body's.
    private var readingRequest = false
    /// Whether a head that is not HTTP has been refused, or a body broke after its answer: the
    /// connection is closing.
    private var refused = false
    /// A refusal waiting for the answers before it: the parser's error and the request id.
    private var pendingRefusal: (HTTPParserError, String)?
    /// Told of each request head refused as not HTTP: the parser's error, the answer's request
    /// id and the client's address.
    private let rejected: (HTTPParserError, String, SocketAddress?) -> Void
    /// Told of each request head over `keptHeadLimit` whose client would have kept the
    /// connection open: it closes after the answer instead. Not told of a head that closes its
    /// connection anyway (`Connection: close`, HTTP/1.0 without keep-alive).
    private let largeHead: () -> Void

    /// The semantics; `rejected` hears of each head refused as not HTTP, `largeHead` of each
    /// head too large to keep its client's connection open for.
    init(rejected: @escaping (HTTPParserError, String, SocketAddress?) -> Void = { _, _, _ in }, largeHead: @escaping () -> Void = {}) {
        self.rejected = rejected
        self.largeHead = largeHead
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // After a request that closes the connection, nothing more (the type's comment).
        guard !closed else { return }
        guard case .head(var head) = unwrapInboundIn(data) else {
            if case .end = unwrapInboundIn(data) {
                readingRequest = false
                if answersBeforeClose != nil {
                    closed = true
                    try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                }
            }
            context.fireChannelRead(data)
            return
        }
        readingRequest = true
        let answersBefore = unanswered
        unanswered += 1
        if head.version.major == 1, head.version.minor >= 1, Self.expectsContinue(head.headers) {
            if answersBefore == 0 {
                writeContinue(context: context)
            } else {
                answersBeforeContinue = answersBefore
            }
        }
        let keepsAlive = head.isKeepAlive
        if !keepsAlive || Self.size(of: head) > Self.keptHeadLimit {
            // A connection its client keeps alive closes for the head's size alone.
            if keepsAlive { largeHead() }
            // Replaced whatever it said: Hummingbird closes only on one field that is exactly `close`.
            head.headers.replaceOrAdd(name: "connection", value: "close")
            // Its answer says so, so the client sends nothing more on the connection.
            if answersBeforeClose == nil { answersBeforeClose = answersBefore }
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        context.fireChannelRead(data)
    }

    /// The largest request head, in bytes, after which the connection stays open.
    static let keptHeadLimit = 8 << 10

    /// A head's size as the connection would keep it, near enough: its target, and for each
    /// field `fieldCost`, its name three times (HTTP types keep it as sent, in lower case and
    /// as its index's key) and its value, each string past 15 bytes (the most a Swift string
    /// holds inline) with 48 bytes for its allocation. So many fields, small on the wire, count
    /// for what keeping them costs: measured, about 97 bytes per short field and 330 per field
    /// of 17-byte name and 16-byte value.
    static func size(of head: HTTPRequestHead) -> Int {
        func stored(_ text: String) -> Int {
            let count = text.utf8.count
            return count > 15 ? count + 48 : 0
        }
        var size = head.uri.utf8.count
        for (name, value) in head.headers { size += fieldCost + 3 * stored(name) + stored(value) }
        return size
    }

    /// What `size(of:)` counts for each field besides its strings: the bytes an `HTTPField`
    /// takes in the list Hummingbird keeps, with the list's growth.
    static let fieldCost = 96

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where answersBeforeClose == 0:
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.write(wrapOutboundOut(.head(head)), promise: promise)
            return
        case .head, .body:
            context.write(data, promise: promise)
            return
        case .end:
            context.write(data, promise: promise)
        }
        if answersBeforeClose == 0, readingRequest, !closed {
            // The answer that closes the connection is out and its request's body is still
            // coming: Hummingbird reads none of it, and the parts already queued for it would
            // stay until the idle timeout (up to ten, 16 KB each).
            closeAfterAnswer(context: context)
            return
        }
        if let waiting = answersBeforeClose, waiting > 0 { answersBeforeClose = waiting - 1 }
        unanswered = max(0, unanswered - 1)
        if unanswered == 0, let (error, requestID) = pendingRefusal {
            pendingRefusal = nil
            writeRefusal(context: context, error, requestID: requestID)
            return
        }
        guard let waiting = answersBeforeContinue else { return }
        if waiting <= 1 {
            answersBeforeContinue = nil
            writeContinue(context: context)
        } else {
            answersBeforeContinue = waiting - 1
        }
    }

    func read(context: ChannelHandlerContext) {
        // A refused or closed connection reads nothing more: it closes once its answers are
        // written (a closed one within the idle timeout, as Hummingbird closes it).
        guard !refused, !closed else { return }
        context.read()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // After a refusal every later byte is an error of the decoder's: one answer is enough.
        guard !refused else { return }
        guard let parserError = error as? HTTPParserError, context.channel.isActive else {
            context.fireErrorCaught(error)
            return
        }
        // Bytes after a request that closes the connection (NIO's parser says
        // `closedConnection` after a client's `Connection: close`): nothing more is answered.
        guard !closed else { return }
        if readingRequest {
            // A broken body whose request is still unanswered is the route's to answer.
            guard unanswered == 0 else {
                context.fireErrorCaught(error)
                return
            }
            closeAfterAnswer(context: context)
            return
        }
        switch parserError {
        case .invalidEOFState:
            // The client closed part-way through a head (or the idle timeout did): nobody to
            // answer, and nothing malformed.
            context.fireErrorCaught(error)
            return
        default:
            break
        }
        refused = true
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        let requestID = RequestID.generate()
        rejected(parserError, requestID, context.channel.remoteAddress)
        if unanswered == 0 {
            writeRefusal(context: context, parserError, requestID: requestID)
        } else {
            pendingRefusal = (parserError, requestID)
        }
    }

    /// Closes the connection once the answers written so far are sent: a request's body broke
    /// after the route answered without reading it. Nobody reads the rest, and passed on, the
    /// error would make Hummingbird answer a bare `400` after the route's answer: two answers
    /// to one request.
    private func closeAfterAnswer(context: ChannelHandlerContext) {
        refused = true
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        // Output first: it waits for the pending writes, where a full close would drop them.
        let sent = context.eventLoop.makePromise(of: Void.self)
        sent.futureResult.whenComplete { _ in context.close(promise: nil) }
        context.close(mode: .output, promise: sent)
    }

    /// `400 invalid-argument` for a head that is not HTTP, then the connection closes.
    private func writeRefusal(context: ChannelHandlerContext, _ parserError: HTTPParserError, requestID: String) {
        let problem = GatehouseError(code: .invalidArgument, detail: "The request is not valid HTTP/1.1 (\(parserError)).")
        let body = problem.problemDocument(requestID: requestID)
        var head = HTTPResponseHead(version: .http1_1, status: .badRequest)
        head.headers.add(name: "content-type", value: "application/problem+json")
        head.headers.add(name: "cache-control", value: "no-store")
        head.headers.add(name: "x-content-type-options", value: "nosniff")
        head.headers.add(name: "x-request-id", value: requestID)
        head.headers.add(name: "content-length", value: String(body.count))
        head.headers.add(name: "connection", value: "close")
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    private func writeContinue(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
    }

    /// Whether the fields hold `Expect: 100-continue` (its value compared without case).
    private static func expectsContinue(_ headers: HTTPHeaders) -> Bool {
        headers["expect"].contains { $0.lowercased() == "100-continue" }
    }
}
