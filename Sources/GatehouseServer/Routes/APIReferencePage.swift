import GatehouseCore
import Hummingbird

/// The API reference at `/docs` (`GATEHOUSE_API_DOCS_FILE`): one self-contained HTML page,
/// answered under a policy that allows no script and nothing from anywhere else — the page
/// needs neither, so a page edited to carry a script still runs none.
struct APIReferencePage {
    /// The page, as read at start.
    let html: String

    /// Adds `GET /docs`, with a strong `ETag` and `304` for a page the caller already has.
    func register(into table: inout RouteTable) {
        let body = ByteBuffer(string: html)
        let etag = "\"" + SecureRandom.digest(html).prefix(32) + "\""
        table.add(.get, "/docs") { request, _ in
            var headers: HTTPFields = [
                .contentType: "text/html; charset=utf-8", .cacheControl: "public, max-age=300", .eTag: etag,
                .contentSecurityPolicy:
                    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            ]
            // RFC 9110 §13.1.2: If-None-Match compares weakly (a proxy that compressed the page
            // sends the tag back as W/"…"); `*` matches any current page.
            let tags = (request.headers[.ifNoneMatch] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if tags.contains(where: { $0 == "*" || $0 == etag || $0 == "W/" + etag }) {
                headers[.contentType] = nil
                return Response(status: .notModified, headers: headers)
            }
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: body))
        }
    }
}
