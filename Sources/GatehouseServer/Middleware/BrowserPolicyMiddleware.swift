import Hummingbird

/// CORS: answers preflights itself and adds the allowed origin's headers to every answer
/// (problem documents included, so a browser can read the error). Origin checks of
/// cookie-authenticated changes stay in the routes, which know who is signed in.
struct BrowserPolicyMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext
    let browser: BrowserPolicy

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        if let preflight = browser.preflight(request) {
            response = preflight
        } else {
            response = try await next(request, context)
        }
        browser.decorate(&response, for: request)
        return response
    }
}
