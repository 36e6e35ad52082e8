import HTTPTypes
import Hummingbird

/// The routes the server serves, as `(method, OpenAPI path)` with their handlers: the OpenAPI
/// test compares them with `OpenAPI/openapi.yaml`, the middlewares use them to tell `405`
/// from `404` and to label metrics. Collected first and put on a router afterwards, because
/// Hummingbird wraps a route in the middlewares present when it is added, and those
/// middlewares need the finished table.
public struct RouteTable: Sendable {
    /// Method (`GET`) and OpenAPI-style path (`/v1/auth/{providerId}/start`).
    public var routes: [(method: String, path: String)] { entries.map { ($0.method.rawValue, $0.path) } }

    private var entries:
        [(
            method: HTTPRequest.Method, path: String, rest: Bool, head: Bool,
            handler: @Sendable (Request, GatehouseRequestContext) async throws -> Response
        )] = []
    /// Each route's path split once (matched again for error answers: `405` or `404`, a
    /// provider's own status): its segments, `nil` for a parameter, and whether its last
    /// parameter takes the rest of the path.
    private var patterns: [(method: String, path: String, segments: [Substring?], rest: Bool)] = []
    /// Each route's template by the path Hummingbird reports for it once it has routed a
    /// request (`context.endpointPath`, `/v1/users/{uid}/providers/{providerId}/api/**`): the
    /// access log labels a request with the router's own match instead of matching again.
    private var templatesByEndpoint: [String: String] = [:]

    /// Records a route and its handler; with `rest`, the path's last parameter takes every
    /// remaining segment (`/api/{path}` matches `/api/v1.0/me/events`). With `head`, a `GET`
    /// route answers `HEAD` too: the same handler, whose body NIO's encoder leaves out of an
    /// answer to `HEAD` (the probes, which uptime checkers often ask with `HEAD`).
    mutating func add(
        _ method: HTTPRequest.Method, _ openAPIPath: String, rest: Bool = false, head: Bool = false,
        _ handler: @escaping @Sendable (Request, GatehouseRequestContext) async throws -> Response
    ) {
        entries.append((method, openAPIPath, rest, head && method == .get, handler))
        let segments = openAPIPath.split(separator: "/", omittingEmptySubsequences: false).map { $0.hasPrefix("{") ? nil : $0 }
        patterns.append((method.rawValue, openAPIPath, segments, rest))
        if head && method == .get { patterns.append((HTTPRequest.Method.head.rawValue, openAPIPath, segments, rest)) }
        templatesByEndpoint[RouterPath(Self.hummingbirdPath(openAPIPath, rest: rest)).description] = openAPIPath
    }

    /// `/v1/users/{uid}/api/{path}` as Hummingbird writes it: `/v1/users/:uid/api/**` (with `rest`).
    private static func hummingbirdPath(_ openAPIPath: String, rest: Bool) -> String {
        var segments = openAPIPath.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}") ? ":" + segment.dropFirst().dropLast() : String(segment)
        }
        if rest { segments[segments.count - 1] = "**" }
        return segments.joined(separator: "/")
    }

    /// Adds every recorded route to `router` (after its middlewares).
    func register(on router: Router<GatehouseRequestContext>) {
        for entry in entries {
            let path = RouterPath(Self.hummingbirdPath(entry.path, rest: entry.rest))
            router.on(path, method: entry.method, use: entry.handler)
            if entry.head { router.on(path, method: .head, use: entry.handler) }
        }
    }

    /// The methods registered for a concrete request path.
    func methods(matching path: String) -> [String] {
        matches(path).map(\.method)
    }

    /// The route template (`/v1/users/{uid}`) of the route Hummingbird served a request by,
    /// from the path it reported (`context.endpointPath`); `nil` when no route took it (an
    /// unknown path or method: Hummingbird reports `NotFound` or nothing).
    func template(endpoint: String?) -> String? {
        endpoint.flatMap { templatesByEndpoint[$0] }
    }

    /// Whether the route serving this request passes a provider's answer on as it is (the
    /// passthrough routes, the only ones with a rest-of-path parameter): its error statuses
    /// are the provider's, not the gateway's, and stay as they are.
    func answersVerbatim(method: String, path: String) -> Bool {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return patterns.contains { $0.rest && $0.method == method && Self.matches($0, segments) }
    }

    private func matches(_ path: String) -> [(method: String, path: String)] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return patterns.filter { Self.matches($0, segments) }.map { ($0.method, $0.path) }
    }

    private static func matches(
        _ pattern: (method: String, path: String, segments: [Substring?], rest: Bool), _ segments: [Substring]
    )
        -> Bool
    {
        let count = pattern.segments.count
        guard pattern.rest ? segments.count >= count : segments.count == count else { return false }
        return zip(pattern.segments, segments).allSatisfy { $0 == nil || $0 == $1 }
    }
}
