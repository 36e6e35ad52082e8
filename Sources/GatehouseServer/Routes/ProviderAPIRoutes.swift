import GatehouseCore
import HTTPTypes
import Hummingbird
import NIOCore

/// Provider API passthrough (`…/providers/{providerId}/api/{path}`, for services by uid and,
/// where the operator allows it, for the signed-in user) and the services' token vault
/// (`/v1/users/{uid}/providers/{providerId}/token`).
struct ProviderAPIRoutes {
    /// The core (its `providerAPI`).
    let gatehouse: Gatehouse
    /// Rate limits and the cookie callers' Origin rules.
    let browser: BrowserPolicy

    /// `/v1/users/{uid}/providers/{providerId}/api/…`: seven segments before the API path.
    static let servicePrefixSegments = 7
    /// `/v1/me/providers/{providerId}/api/…`: six.
    static let userPrefixSegments = 6

    /// Adds both route families for every method, and the token route.
    func register(into table: inout RouteTable) {
        let api = gatehouse.providerAPI
        let publicURL = gatehouse.configuration.publicURL
        let browser = self.browser
        for method in APIMethod.allCases {
            let httpMethod = HTTPRequest.Method(rawValue: method.rawValue)!
            table.add(httpMethod, "/v1/users/{uid}/providers/{providerId}/api/{path}", rest: true) { request, context in
                let providerId = try context.parameters.require("providerId")
                let key = try await browser.serviceKey(context, scope: "api:\(providerId)")
                let uid = try context.parameters.require("uid")
                return try await Self.forward(
                    request, eventLoop: context.eventLoop, method: method, api: api, uid: uid, providerId: providerId,
                    caller: .service(keyId: key.id),
                    prefixSegments: Self.servicePrefixSegments,
                    gatewayBase: "\(publicURL)/v1/users/\(FormEncoding.escape(uid))/providers/\(FormEncoding.escape(providerId))/api")
            }
            table.add(httpMethod, "/v1/me/providers/{providerId}/api/{path}", rest: true) { request, context in
                let caller = try await context.requireUser()
                try await browser.limit(user: caller.uid)
                // Cookie callers follow the rules of every other cookie route: a change needs
                // an allowed Origin, a read is refused when it comes from another site.
                if method == .get {
                    try browser.refuseCrossSite(request, caller: caller)
                } else {
                    try browser.requireAllowedOrigin(request, caller: caller)
                }
                let providerId = try context.parameters.require("providerId")
                return try await Self.forward(
                    request, eventLoop: context.eventLoop, method: method, api: api, uid: caller.uid, providerId: providerId, caller: .user,
                    prefixSegments: Self.userPrefixSegments,
                    gatewayBase: "\(publicURL)/v1/me/providers/\(FormEncoding.escape(providerId))/api")
            }
        }
        table.add(.get, "/v1/users/{uid}/providers/{providerId}/token") { request, context in
            let providerId = try context.parameters.require("providerId")
            let key = try await browser.serviceKey(context, scope: "tokens:\(providerId)")
            let token = try await api.accessToken(uid: try context.parameters.require("uid"), providerId: providerId, keyId: key.id)
            return try Response.json(token)
        }
    }

    /// What follows the route's first `prefixSegments` slashes of `path`: the provider API path,
    /// still percent-encoded. Found byte by byte, as the router splits the path: a `Character`
    /// split took a slash followed by a combining mark for one character, not a separator, and
    /// so cut the API path one segment further on (and cost a grapheme walk of the whole path).
    static func apiPath(of path: String, after prefixSegments: Int) -> Substring {
        var slashes = 0
        var index = path.utf8.startIndex
        while index < path.utf8.endIndex {
            if path.utf8[index] == UInt8(ascii: "/") {
                slashes += 1
                // The next byte begins a scalar (a slash is a byte of its own in UTF-8), so the
                // slice may start there even inside a grapheme cluster.
                if slashes == prefixSegments { return path[path.utf8.index(after: index)...] }
            }
            path.utf8.formIndex(after: &index)
        }
        return ""  // not under the route's prefix: an empty API path, which `APIPath` refuses
    }

    /// Checks the call against the policy before reading anything, streams the body to the
    /// provider within its cap (a declared length over it is refused before any call), makes the call and answers what the provider answered — recorded once
    /// (audit line and metric) with the status the caller gets.
    static func forward(
        _ request: Request, eventLoop: any EventLoop, method: APIMethod, api: ProviderAPIService, uid: String, providerId: String,
        caller: ProviderAPIService.Caller,
        prefixSegments: Int, gatewayBase: @autoclosure () -> String
    ) async throws -> Response {
        var template: APITemplate?
        do {
            let path = try APIPath(raw: Self.apiPath(of: request.uri.path, after: prefixSegments))
            let allowed = try api.authorize(providerId: providerId, method: method, path: path, query: request.uri.query, caller: caller)
            template = allowed.template
            // Streamed to the provider as it arrives, within the policy's cap.
            let body = method.hasBody ? try CappedRequestBody.upload(request, cap: allowed.limits.maxRequestBytes) : nil
            let headers = request.headers.map { (name: $0.name.canonicalName, value: $0.value) }
            let answer = try await api.call(allowed, headers: headers, body: body, uid: uid, gatewayBase: gatewayBase())
            api.record(uid: uid, providerId: providerId, caller: caller, method: method, template: template, status: answer.status)
            return response(answer, eventLoop: eventLoop)
        } catch let error as GatehouseError {
            api.record(
                uid: uid, providerId: providerId, caller: caller, method: method, template: template, status: Int(error.status.code),
                insufficientScope: error.code == .insufficientProviderScope)
            throw error
        } catch {
            // A body over the cap (Hummingbird's error) and anything else: the problem
            // middleware renders it; the audit records what it will answer.
            api.record(uid: uid, providerId: providerId, caller: caller, method: method, template: template, status: Self.status(of: error))
            throw error
        }
    }

    /// `Cross-Origin-Resource-Policy`.
    static let resourcePolicy = HTTPField.Name("Cross-Origin-Resource-Policy")!

    /// The provider's answer as the gateway's: its status and passed headers, and a policy
    /// that keeps a provider's document from running anything on the gateway's origin.
    static func response(_ answer: ProviderAPIAnswer, eventLoop: any EventLoop) -> Response {
        var headers = HTTPFields()
        // Room for the answer's fields and all that the gateway adds (the three below and
        // `Content-Length`, then the way out's): grown field by field, the list would be copied
        // twice per call.
        headers.reserveCapacity(answer.headers.count + 4 + Response.fieldsAddedOnTheWayOut)
        for (name, value) in answer.headers {
            if let field = HTTPField.Name(name) { headers.append(HTTPField(name: field, value: value)) }
        }
        headers[.contentSecurityPolicy] = "default-src 'none'; sandbox"
        // Never loaded by another origin's page as a script, style or image, the allowed
        // origins' included (a provider answering JSONP as JavaScript would otherwise hand a
        // cookie caller's data to a sibling site's `<script>`); CORS reads are not affected.
        headers[Self.resourcePolicy] = "same-origin"
        headers[.cacheControl] = "private, no-store"
        let status = HTTPResponse.Status(code: answer.status)
        switch answer.body {
        case .whole(let bytes):
            // Set here, not by Hummingbird's initializer, which would set it in a copy of the fields.
            headers[.contentLength] = String(bytes.count)
            guard let hold = answer.hold else {
                return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
            }
            // A body the answer budget holds goes out a piece at a time, the next once the
            // connection took the last (as streamed answers do), and its bytes are given back once
            // the last piece is handed over (or when the write is abandoned and the body
            // dropped): a caller that stops reading keeps its hold on the budget, not a copy of
            // the whole answer in its connection's buffers that the budget no longer counts.
            return Response(
                status: status, headers: headers,
                body: ResponseBody(contentLength: bytes.count) { writer in
                    var start = 0
                    repeat {
                        let end = min(bytes.count, start + Self.heldAnswerPiece)
                        let piece = ByteBuffer(bytes: bytes[start..<end])
                        if end < bytes.count { try await writer.write(piece, pacedBy: eventLoop) } else { try await writer.write(piece) }
                        start = end
                    } while start < bytes.count
                    try await writer.finish(nil)
                    withExtendedLifetime(hold) {}
                })
        case .streaming(let chunks):
            return Response(
                status: status, headers: headers,
                body: ResponseBody { writer in
                    for try await chunk in chunks {
                        try await writer.write(ByteBuffer(bytes: chunk), pacedBy: eventLoop)
                    }
                    try await writer.finish(nil)
                })
        }
    }

    /// The largest piece of a held answer written at a time (`response`).
    static let heldAnswerPiece = 64 << 10

    /// The status a non-`GatehouseError` failure is answered with (a body over the cap: 413).
    private static func status(of error: any Error) -> Int {
        (error as? any HTTPResponseError).map { Int($0.status.code) } ?? 500
    }
}
