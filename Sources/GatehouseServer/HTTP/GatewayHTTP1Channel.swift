import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1 channel with `HTTP1Semantics` between NIO's HTTP/1 decoder and the
/// conversion to HTTP types: Hummingbird's additional handlers come after that conversion,
/// where a request's version is no longer known. Each connection reads into at most one kept
/// buffer of at most 16 KB (`receiveBuffers`).
struct GatewayHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    /// The channel it wraps.
    let inner: HTTP1Channel
    /// Told of each request head `HTTP1Semantics` refuses as not HTTP.
    let rejected: @Sendable (HTTPParserError, String, SocketAddress?) -> Void
    /// Told of each request head too large to keep its client's connection open for
    /// (`HTTP1Semantics.keptHeadLimit`).
    let largeHead: @Sendable () -> Void

    /// A server builder of such channels.
    static func builder(
        configuration: HTTP1Channel.Configuration, largeHead: @escaping @Sendable () -> Void,
        rejected: @escaping @Sendable (HTTPParserError, String, SocketAddress?) -> Void
    ) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GatewayHTTP1Channel(
                inner: HTTP1Channel(responder: responder, configuration: configuration), rejected: rejected, largeHead: largeHead)
        }
    }

    /// How a connection reads: into a buffer of 2 KB at first, doubled after a read that fills
    /// it, at most 16 KB, one read per readiness of the socket.
    ///
    /// NIO keeps the buffers a connection has read into for its next reads until it closes: as
    /// many as reads per readiness (4 by default), each as large as the reads grew it (64 KB by
    /// default). With NIO's defaults one request with a 1 MB body, even to a route that refuses
    /// it, left its connection holding about 276 KB while idle, against 22.5 KB after a short
    /// request; with one buffer of at most 16 KB, about 36 KB. A body then arrives in more reads:
    /// about 1.2 ms of CPU per megabyte against 0.5 (still over 800 MB/s on one core).
    static let receiveBuffers = (
        allocator: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 16 << 10), readsPerReadiness: UInt(1)
    )

    /// Hummingbird's pipeline, with `HTTP1Semantics` put in front of the conversion to HTTP
    /// types, on a channel that reads as `receiveBuffers` says.
    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            guard let options = channel.syncOptions else { throw ChannelError.operationUnsupported }
            try options.setOption(ChannelOptions.recvAllocator, value: Self.receiveBuffers.allocator)
            try options.setOption(ChannelOptions.maxMessagesPerRead, value: Self.receiveBuffers.readsPerReadiness)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let operations = channel.pipeline.syncOperations
            let semantics = HTTP1Semantics(rejected: rejected, largeHead: largeHead)
            try operations.addHandler(semantics, position: .before(try operations.handler(type: HTTP1ToHTTPServerCodec.self)))
            return value
        }
    }

    /// Serves the connection as Hummingbird does.
    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}
