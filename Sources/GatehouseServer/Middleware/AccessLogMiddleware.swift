import GatehouseCore
import Hummingbird
import Logging

/// The outermost link: one access-log line and the request metrics for every answer, errors
/// and preflights included (the inner links never throw past `ProblemMiddleware`).
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext
    /// Route templates for the metrics' `route` label (bounded: never the raw path).
    let routes: RouteTable
    let metrics: ServerMetrics
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - started
        metrics.request(
            method: request.method.rawValue, route: routes.template(endpoint: context.endpointPath) ?? "unmatched",
            status: Int(response.status.code), duration: elapsed)
        // The query string is never logged: callbacks carry codes and state in it.
        logger.info(
            "request",
            metadata: [
                "http.method": "\(request.method.rawValue)", "http.path": "\(request.uri.path)",
                "http.status": .stringConvertible(Int(response.status.code)),
                "duration.ms": .stringConvertible(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15),
            ])
        return response
    }
}
