import HTTPTypes
import Hummingbird

/// The routes the server registered, as `(method, OpenAPI path)`: the OpenAPI test compares
/// them with `OpenAPI/openapi.yaml`, and the problem responder uses them to tell `405` from `404`.
public struct RouteTable: Sendable {
    /// Method (`GET`) and OpenAPI-style path (`/v1/auth/{providerId}/start`).
    public private(set) var routes: [(method: String, path: String)] = []

    /// Registers a handler and records the route.
    mutating func add(
        _ router: Router<GatehouseRequestContext>, _ method: HTTPRequest.Method, _ openAPIPath: String,
        _ handler: @escaping @Sendable (Request, GatehouseRequestContext) async throws -> Response
    ) {
        routes.append((method.rawValue, openAPIPath))
        let hummingbirdPath = openAPIPath.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}") ? ":" + segment.dropFirst().dropLast() : String(segment)
        }.joined(separator: "/")
        router.on(RouterPath(hummingbirdPath), method: method, use: handler)
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
