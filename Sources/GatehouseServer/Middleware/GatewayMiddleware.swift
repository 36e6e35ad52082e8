import GatehouseCore
import Hummingbird

/// The gateway's one link around every route, outermost first: the request id
/// (`RequestIDAssignment`), the access log and metrics (`AccessLog`), security headers
/// (`SecurityHeaders`), CORS (`BrowserPolicy`), problem documents (`ProblemMapping`) and
/// the request's credentials (`CredentialReader`). Nothing is thrown past it.
///
/// One link rather than one middleware per concern: Hummingbird serves a connection's
/// requests in the connection's task, each middleware costs about three async frames there
/// (its `handle`, the chain's closure and a thunk), and a task keeps the slabs its deepest
/// request needed until the connection closes. Six middlewares cost every idle keep-alive
/// connection about 12 KB (heaptrack of 5,000 of them); the concerns stay apart as plain
/// values, called from one frame.
struct GatewayMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext
    let requestIDs: RequestIDAssignment
    /// `nil` on the operations listener (its probes and scrapes are not logged).
    let accessLog: AccessLog?
    /// `nil` on the operations listener (no browser calls it).
    let browser: BrowserPolicy?
    let problems: ProblemMapping
    /// `nil` on the operations listener (no route there asks who is calling).
    let credentials: CredentialReader?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let (id, offered) = requestIDs.assign(request, context)
        var response = await RequestID.$current.withValue(id) {
            await RequestID.$offered.withValue(offered) {
                guard let accessLog else { return await answer(request, context, next) }
                let started = ContinuousClock.now
                let actor = RequestActor()
                let response = await RequestActor.$current.withValue(actor) { await answer(request, context, next) }
                accessLog.record(request, context, response, elapsed: ContinuousClock.now - started, actor: actor)
                return response
            }
        }
        response.headers[.xRequestID] = id
        return response
    }

    /// The route's answer, or its error's problem document, with the headers every answer gets.
    private func answer(_ request: Request, _ context: Context, _ next: (Request, Context) async throws -> Response) async -> Response {
        var response: Response
        if let preflight = browser?.preflight(request) {
            response = preflight
        } else {
            var context = context
            if let credentials { context.credentials = credentials.read(request) }
            do {
                response = problems.checked(try await next(request, context), for: request)
            } catch {
                response = problems.response(for: error, to: request)
            }
        }
        browser?.decorate(&response, for: request)
        SecurityHeaders.apply(to: &response, path: request.uri.path)
        return response
    }
}
