import Hummingbird
import NIOCore

/// The request context of every gateway route: Hummingbird's basics plus the peer address,
/// which the rate limits key on.
public struct GatehouseRequestContext: RequestContext, RemoteAddressRequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The connected peer (a proxy, when one is in front).
    public let remoteAddress: SocketAddress?
    /// The connection's event loop (answers written from memory wait for it: `write(_:pacedBy:)`).
    public let eventLoop: any EventLoop
    /// What the request presents to prove who it is (`CredentialReader`, in `GatewayMiddleware`).
    var credentials = Credentials.none

    /// Built by Hummingbird for each request.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        eventLoop = source.channel.eventLoop
    }
}
