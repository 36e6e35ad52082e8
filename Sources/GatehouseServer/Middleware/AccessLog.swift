import GatehouseCore
import Hummingbird
import Logging

/// One access-log line and the request metrics for every answer, errors and preflights
/// included. The line answers "who, from where": the client's address (through the trusted
/// proxies), the user or service key the route found, the user agent, and the answer's size
/// when known. Probes (`/healthz`, `/readyz`) are logged at debug unless `logProbes`: an
/// orchestrator's every-few-seconds checks would bury the rest.
///
/// A class for the reason `BrowserPolicy` is one: every answer reaches it by one reference.
final class AccessLog: Sendable {
    /// Route templates for the metrics' `route` label (bounded: never the raw path).
    let routes: RouteTable
    let metrics: ServerMetrics
    let logger: Logger
    /// Who the client is behind the trusted proxies.
    let browser: BrowserPolicy
    /// Whether probes are logged at info like every other request.
    let logProbes: Bool

    /// The log of answers found in `routes`, recorded into `metrics` and `logger`.
    init(routes: RouteTable, metrics: ServerMetrics, logger: Logger, browser: BrowserPolicy, logProbes: Bool) {
        self.routes = routes
        self.metrics = metrics
        self.logger = logger
        self.browser = browser
        self.logProbes = logProbes
    }

    /// Records one answered request, whose path is `path`: its metrics, and its line (inside
    /// the request's `RequestScope`, whose id the line carries).
    func record(
        _ request: Request, path: String, _ context: GatehouseRequestContext, _ response: Response, elapsed: Duration, scope: RequestScope?
    ) {
        metrics.request(
            method: request.method.rawValue, route: routes.template(endpoint: context.endpointPath) ?? "unmatched",
            status: Int(response.status.code), duration: elapsed)
        let level: Logger.Level = !logProbes && (path == "/healthz" || path == "/readyz") ? .debug : .info
        // Built only when the line is written (swift-log's autoclosure).
        logger.log(level: level, "request", metadata: fields(request, path: path, context, response, elapsed: elapsed, scope: scope))
    }

    /// The longest path a line carries whole, in bytes: past it a line would grow with whatever
    /// a client sends (NIO accepts request lines far longer).
    static let maximumLoggedPath = 2048

    /// `path`, or its first `maximumLoggedPath` bytes and `…` (a multi-byte character cut
    /// there becomes U+FFFD).
    static func loggable(path: String) -> String {
        guard path.utf8.count > maximumLoggedPath else { return path }
        return String(decoding: path.utf8.prefix(maximumLoggedPath), as: UTF8.self) + "…"
    }

    /// The line's fields. The query string is never logged: callbacks carry codes and state in it.
    private func fields(
        _ request: Request, path: String, _ context: GatehouseRequestContext, _ response: Response, elapsed: Duration, scope: RequestScope?
    ) -> Logger.Metadata {
        var metadata = Logger.Metadata(minimumCapacity: 8)  // every field at once, no rehash
        metadata["http.method"] = .string(request.method.rawValue)
        metadata["http.path"] = .string(Self.loggable(path: path))
        metadata["http.status"] = .stringConvertible(Int(response.status.code))
        metadata["duration.ms"] = .stringConvertible(
            Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        metadata["client.address"] = .string(browser.client(request, context))
        if let agent = request.headers[.userAgent] { metadata["http.user_agent"] = .string(agent.truncated(toBytes: 256)) }
        if let bytes = response.body.contentLength { metadata["http.response_bytes"] = .stringConvertible(bytes) }
        if let (field, id) = scope?.actorField { metadata[field] = .string(id) }
        return metadata
    }
}
