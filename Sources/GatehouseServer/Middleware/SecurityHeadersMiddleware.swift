import HTTPTypes
import Hummingbird

/// The headers every answer carries: `nosniff`, and no `Referer` leaving the sign-in pages
/// (their URLs carry provider codes and state). Answers about a user (`/v1/me…`,
/// `/v1/users…`: profiles, photos, provider API calls) have the same URL for every user and
/// differ by credential, so they are `Cache-Control: private` (`private, no-store` unless the
/// route chose a private policy, as photos do) and `Vary: Cookie, Authorization`: a shared
/// cache in front of the gateway never serves one user's answer to another.
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        let path = request.uri.path
        if path.hasPrefix("/v1/auth") {
            response.headers[.referrerPolicy] = "no-referrer"
        } else if Self.isPerUser(path) {
            if response.headers[.cacheControl]?.hasPrefix("private") != true {
                response.headers[.cacheControl] = "private, no-store"
            }
            response.headers.append(HTTPField(name: .vary, value: "Cookie, Authorization"))
        }
        return response
    }

    /// `/v1/me`, `/v1/me/…`, `/v1/users`, `/v1/users/…`, read by segments as the router reads
    /// them (`//v1/me` and `/v1//me` reach the same route).
    static func isPerUser(_ path: String) -> Bool {
        var segments = path.split(separator: "/", omittingEmptySubsequences: true).makeIterator()
        guard segments.next() == "v1", let second = segments.next() else { return false }
        return second == "me" || second == "users"
    }
}
