import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1 channel with `HTTP1Semantics` between NIO's HTTP/1 decoder and the
/// conversion to HTTP types: Hummingbird's additional handlers come after that conversion,
/// where a request's version is no longer known.
struct GatewayHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    /// The channel it wraps.
    let inner: HTTP1Channel
    /// Told of each request head `HTTP1Semantics` refuses as not HTTP.
    let rejected: @Sendable (HTTPParserError, String, SocketAddress?) -> Void

    /// A server builder of such channels.
    static func builder(
        configuration: HTTP1Channel.Configuration, rejected: @escaping @Sendable (HTTPParserError, String, SocketAddress?) -> Void
    ) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GatewayHTTP1Channel(inner: HTTP1Channel(responder: responder, configuration: configuration), rejected: rejected)
        }
    }

    /// Hummingbird's pipeline, with `HTTP1Semantics` put in front of the conversion to HTTP types.
    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let operations = channel.pipeline.syncOperations
            try operations.addHandler(
                HTTP1Semantics(rejected: rejected), position: .before(try operations.handler(type: HTTP1ToHTTPServerCodec.self)))
            return value
        }
    }

    /// Serves the connection as Hummingbird does.
    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}
