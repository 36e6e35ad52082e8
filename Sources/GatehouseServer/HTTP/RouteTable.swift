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
            method: HTTPRequest.Method, path: String, rest: Bool, handler: @Sendable (Request, GatehouseRequestContext) async throws -> Response
        )] = []
    /// Each route's path split once (matching runs on every request, for the access log):
    /// its segments, `nil` for a parameter, how many parameters it has, and whether its last
    /// parameter takes the rest of the path.
    private var patterns: [(method: String, path: String, segments: [Substring?], parameters: Int, rest: Bool)] = []

    /// Records a route and its handler; with `rest`, the path's last parameter takes every
    /// remaining segment (`/api/{path}` matches `/api/v1.0/me/events`).
    mutating func add(
        _ method: HTTPRequest.Method, _ openAPIPath: String, rest: Bool = false,
        _ handler: @escaping @Sendable (Request, GatehouseRequestContext) async throws -> Response
    ) {
        entries.append((method, openAPIPath, rest, handler))
        let segments = openAPIPath.split(separator: "/", omittingEmptySubsequences: false).map { $0.hasPrefix("{") ? nil : $0 }
        patterns.append((method.rawValue, openAPIPath, segments, segments.filter { $0 == nil }.count, rest))
    }

    /// Adds every recorded route to `router` (after its middlewares).
    func register(on router: Router<GatehouseRequestContext>) {
        for entry in entries {
            var segments = entry.path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
                segment.hasPrefix("{") && segment.hasSuffix("}") ? ":" + segment.dropFirst().dropLast() : String(segment)
            }
            if entry.rest { segments[segments.count - 1] = "**" }
            let hummingbirdPath = segments.joined(separator: "/")
            router.on(RouterPath(hummingbirdPath), method: entry.method, use: entry.handler)
        }
    }

    /// The methods registered for a concrete request path.
    func methods(matching path: String) -> [String] {
        matches(path).map(\.method)
    }

    /// The route template a request was served by (`/v1/users/{uid}`), or `nil` for none;
    /// a literal segment wins over a parameter (`/v1/users` over `/v1/{x}`).
    func template(method: String, path: String) -> String? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        var best: (path: String, parameters: Int)?
        for pattern in patterns where pattern.method == method && Self.matches(pattern, segments) {
            if best.map({ pattern.parameters < $0.parameters }) ?? true { best = (pattern.path, pattern.parameters) }
        }
        return best?.path
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
        _ pattern: (method: String, path: String, segments: [Substring?], parameters: Int, rest: Bool), _ segments: [Substring]
    )
        -> Bool
    {
        let count = pattern.segments.count
        guard pattern.rest ? segments.count >= count : segments.count == count else { return false }
        return zip(pattern.segments, segments).allSatisfy { $0 == nil || $0 == $1 }
    }
}
