import GatehouseCore
import Hummingbird

/// Which id a request is served under (`GatewayMiddleware` binds it in the request's `RequestScope` while
/// the request is served, so every log line and problem document of it carries it, and
/// returns it as `X-Request-Id` on every answer). A sane incoming `X-Request-Id` is adopted
/// only from a trusted proxy (`GATEHOUSE_TRUSTED_PROXIES`), which assigned it; any other
/// caller's value is kept as the scope's `offered` (its own log field) and the request gets a
/// new id.
struct RequestIDAssignment: Sendable {
    /// The peers whose request ids are adopted.
    let trustedProxies: TrustedProxies

    /// The request's id, and the caller's own id when it was not adopted.
    func assign(_ request: Request, _ context: GatehouseRequestContext) -> (id: String, offered: String?) {
        let incoming = RequestID.accepted(request.headers[.xRequestID])
        let adopted = incoming.flatMap { id in context.remoteAddress?.ipAddress.flatMap { trustedProxies.contains($0) ? id : nil } }
        return (adopted ?? RequestID.generate(), adopted == nil ? incoming : nil)
    }
}
