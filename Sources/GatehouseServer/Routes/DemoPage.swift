import Foundation
import Hummingbird

/// The demo page at `/`: sign in with any configured provider, the unified profile and photo,
/// linking (including the `account-exists-with-different-credential` round trip), unlinking
/// with re-authentication, sign-out and account deletion — all through the public API.
struct DemoPage {
    /// The configured provider ids, in the order the page offers them.
    let providerIds: [String]

    /// Adds `GET /` (the page is rendered once, at start).
    func register(into table: inout RouteTable) {
        let html = Self.page(providerIds: providerIds)
        table.add(.get, "/") { _, _ in
            Response(
                status: .ok,
                headers: [
                    .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                    .contentSecurityPolicy: "default-src 'self'; img-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
        }
    }

    /// The page with the provider ids filled in as a JSON array. `<` is escaped so no id can
    /// close the script element it sits in.
    static func page(providerIds: [String]) -> String {
        guard let url = Bundle.module.url(forResource: "demo", withExtension: "html", subdirectory: "Resources"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else { return "<!doctype html><p>demo page missing</p>" }
        let json = (try? JSONEncoder().encode(providerIds)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        return text.replacingOccurrences(
            of: "__GATEHOUSE_PROVIDERS__", with: json.replacingOccurrences(of: "<", with: "\\u003c"))
    }
}
