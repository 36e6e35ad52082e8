import GatehouseCore
import Hummingbird

/// The outermost link: the caller's sane `X-Request-Id` or a new one, set as
/// `RequestID.current` while the request is served (every log line and problem document of
/// it carries it) and returned as `X-Request-Id` on every answer.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let id = RequestID.accepted(request.headers[.xRequestID]) ?? RequestID.generate()
        var response = try await RequestID.$current.withValue(id) { try await next(request, context) }
        response.headers[.xRequestID] = id
        return response
    }
}
