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

    /// Records a route and its handler.
    mutating func add(
        _ method: HTTPRequest.Method, _ openAPIPath: String,
        _ handler: @escaping @Sendable (Request, GatehouseRequestContext) async throws -> Response
    ) {
        entries.append((method, openAPIPath, handler))
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
        matches(path).filter { $0.method == method }.map(\.path).max { $0.filter { $0 == "{" }.count > $1.filter { $0 == "{" }.count }
    }

    private func matches(_ path: String) -> [(method: String, path: String)] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return routes.filter { route in
            let pattern = route.path.split(separator: "/", omittingEmptySubsequences: false)
            return pattern.count == segments.count && zip(pattern, segments).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
        }
    }
}
