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
        var response = await RequestScope.$current.withValue(RequestScope(id: id, offered: offered)) {
            await answer(request, context, next)
        }
        response.headers[.xRequestID] = id
        return response
    }

    /// The route's answer, or its error's problem document, with the headers every answer
    /// gets; recorded in the access log. Runs in the request's scope.
    ///
    /// The connection's task keeps this frame in its stack slabs while the connection is open,
    /// so the work before and after the route's `await` is in functions of their own, never
    /// inlined. The frame's size, as its async function pointer declares it: 864 bytes; 1,088
    /// with the preflight check inlined, 2,336 with the access log's line inlined too.
    private func answer(_ request: Request, _ context: Context, _ next: (Request, Context) async throws -> Response) async -> Response {
        let started = ContinuousClock.now
        if let preflight = preflight(request) { return finished(.preflight(preflight), request, context, since: started) }
        let outcome: Outcome
        do {
            outcome = .routed(try await next(request, credentialed(context, request)))
        } catch {
            outcome = .failed(error)
        }
        return finished(outcome, request, context, since: started)
    }

    /// What answered a request before its headers were added.
    private enum Outcome {
        /// A CORS preflight, answered here.
        case preflight(Response)
        /// The route's answer.
        case routed(Response)
        /// What the route threw.
        case failed(any Error)
    }

    /// The answer to a CORS preflight, when the request is one.
    @inline(never)
    private func preflight(_ request: Request) -> Response? {
        browser?.preflight(request)
    }

    /// The context with the request's credentials (`CredentialReader`). A request that
    /// presents none keeps the context as it came: copying it retains each of its references.
    @inline(never)
    private func credentialed(_ context: Context, _ request: Request) -> Context {
        guard let credentials else { return context }
        let read = credentials.read(request)
        guard !read.presentsNone else { return context }
        var context = context
        context.credentials = read
        return context
    }

    /// The answer with the headers every answer gets, recorded in the access log.
    @inline(never)
    private func finished(_ outcome: Outcome, _ request: Request, _ context: Context, since started: ContinuousClock.Instant) -> Response {
        var response =
            switch outcome {
            case .preflight(let preflight): preflight
            case .routed(let routed): problems.checked(routed, for: request)
            case .failed(let error): problems.response(for: error, to: request)
            }
        // Room for every field added below and by `handle`, in one copy at most: a field added
        // to storage another value still holds, or past its capacity, copies it each time.
        response.headers.reserveCapacity(response.headers.count + Response.fieldsAddedOnTheWayOut)
        // Read once: `URI.path` builds a new string at every read, allocated past 15 bytes.
        let path = request.uri.path
        browser?.decorate(&response, for: request, path: path)
        SecurityHeaders.apply(to: &response, path: path)
        accessLog?.record(request, path: path, context, response, elapsed: ContinuousClock.now - started, scope: RequestScope.current)
        return response
    }
}
