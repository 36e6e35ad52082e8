import GatehouseCore
import Hummingbird

/// The outermost link: the request's id, set as `RequestID.current` while the request is
/// served (every log line and problem document of it carries it) and returned as
/// `X-Request-Id` on every answer. A sane incoming `X-Request-Id` is adopted only from a
/// trusted proxy (`GATEHOUSE_TRUSTED_PROXIES`), which assigned it; any other caller's value is
/// kept as `RequestID.offered` (its own log field) and the request gets a new id.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext
    /// The peers whose request ids are adopted.
    let trustedProxies: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let incoming = RequestID.accepted(request.headers[.xRequestID])
        let adopted = incoming.flatMap { id in context.remoteAddress?.ipAddress.flatMap { trustedProxies.contains($0) ? id : nil } }
        let id = adopted ?? RequestID.generate()
        let offered = adopted == nil ? incoming : nil
        var response = try await RequestID.$current.withValue(id) {
            try await RequestID.$offered.withValue(offered) { try await next(request, context) }
        }
        response.headers[.xRequestID] = id
        return response
    }
}
