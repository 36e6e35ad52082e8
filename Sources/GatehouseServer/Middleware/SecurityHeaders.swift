import HTTPTypes
import Hummingbird

/// The headers every answer carries: `nosniff`, and no `Referer` leaving the sign-in pages
/// (their URLs carry provider codes and state; the consent page sends one to the gateway only). Answers about a user (`/v1/me…`,
/// `/v1/users…`: profiles, photos, provider API calls) have the same URL for every user and
/// differ by credential, so they are `Cache-Control: private` (`private, no-store` unless the
/// route chose a private policy, as photos do) and `Vary: Cookie, Authorization`: a shared
/// cache in front of the gateway never serves one user's answer to another.
enum SecurityHeaders {
    /// Adds them to the answer to a request for `path`.
    static func apply(to response: inout Response, path: String) {
        response.headers[.xContentTypeOptions] = "nosniff"
        if path.hasPrefix("/v1/auth") {
            // A page of the sign-in routes may set its own (the consent page's form needs its Origin).
            if response.headers[.referrerPolicy] == nil { response.headers[.referrerPolicy] = "no-referrer" }
        } else if Self.isPerUser(path) {
            // The fields themselves, not the subscript, which joins every value into a new string.
            if response.headers.first(where: { $0.name == .cacheControl })?.value.hasPrefix("private") != true {
                response.headers[.cacheControl] = "private, no-store"
            }
            response.headers.append(HTTPField(name: .vary, value: "Cookie, Authorization"))
        }
    }

    /// `/v1/me`, `/v1/me/…`, `/v1/users`, `/v1/users/…`, read by segments as the router reads
    /// them (`//v1/me` and `/v1//me` reach the same route).
    ///
    /// Reads the path's bytes in place: splitting it into an array ran on every answer,
    /// `/healthz` included (measured: a quarter of a microsecond of its 31).
    static func isPerUser(_ path: String) -> Bool {
        var segments = PathSegments(path)
        guard let first = segments.next(), first.elementsEqual("v1".utf8), let second = segments.next() else { return false }
        return second.elementsEqual("me".utf8) || second.elementsEqual("users".utf8)
    }

    /// The non-empty segments of a path's bytes, without copying them.
    private struct PathSegments: IteratorProtocol {
        var rest: Substring.UTF8View

        init(_ path: String) { rest = path[...].utf8 }

        mutating func next() -> Substring.UTF8View? {
            let slash = UInt8(ascii: "/")
            guard let start = rest.firstIndex(where: { $0 != slash }) else { return nil }
            let end = rest[start...].firstIndex(of: slash) ?? rest.endIndex
            defer { rest = rest[end...] }
            return rest[start..<end]
        }
    }
}
