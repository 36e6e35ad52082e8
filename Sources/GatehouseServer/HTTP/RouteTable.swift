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
        [(method: HTTPRequest.Method, path: String, handler: @Sendable (Request, GatehouseRequestContext) async throws -> Response)] =
            []
    /// Each route's path split once (matching runs on every request, for the access log):
    /// its segments, `nil` for a parameter, and how many parameters it has.
    private var patterns: [(method: String, path: String, segments: [Substring?], parameters: Int)] = []

    /// Records a route and its handler.
    mutating func add(
        _ method: HTTPRequest.Method, _ openAPIPath: String,
        _ handler: @escaping @Sendable (Request, GatehouseRequestContext) async throws -> Response
    ) {
        entries.append((method, openAPIPath, handler))
        let segments = openAPIPath.split(separator: "/", omittingEmptySubsequences: false).map { $0.hasPrefix("{") ? nil : $0 }
        patterns.append((method.rawValue, openAPIPath, segments, segments.filter { $0 == nil }.count))
    }

    /// Adds every recorded route to `router` (after its middlewares).
    func register(on router: Router<GatehouseRequestContext>) {
        for entry in entries {
            let hummingbirdPath = entry.path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
                segment.hasPrefix("{") && segment.hasSuffix("}") ? ":" + segment.dropFirst().dropLast() : String(segment)
            }.joined(separator: "/")
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
        for pattern in patterns where pattern.method == method && Self.matches(pattern.segments, segments) {
            if best.map({ pattern.parameters < $0.parameters }) ?? true { best = (pattern.path, pattern.parameters) }
        }
        return best?.path
    }

    private func matches(_ path: String) -> [(method: String, path: String)] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return patterns.filter { Self.matches($0.segments, segments) }.map { ($0.method, $0.path) }
    }

    private static func matches(_ pattern: [Substring?], _ segments: [Substring]) -> Bool {
        pattern.count == segments.count && zip(pattern, segments).allSatisfy { $0 == nil || $0 == $1 }
    }
}
