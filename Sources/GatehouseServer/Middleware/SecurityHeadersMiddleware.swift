import Hummingbird

/// The headers every answer carries: `nosniff`, and no `Referer` leaving the sign-in pages
/// (their URLs carry provider codes and state).
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        if request.uri.path.hasPrefix("/v1/auth") {
            response.headers[.referrerPolicy] = "no-referrer"
        }
        return response
    }
}
