import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

extension GatehouseError {
    /// The RFC 9457 problem document (`type`, `title`, `status`, `detail`, `code`, extensions)
    /// as a response, with `Retry-After` when set. `ProblemMiddleware` turns thrown errors into it.
    func problemResponse() -> Response {
        var object: [String: Any] = [
            "type": "urn:gatehouse:problem:\(code)", "title": title, "status": status, "detail": detail, "code": code.rawValue,
        ]
        for (key, value) in extensions { object[key] = value }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        var headers: HTTPFields = [.contentType: "application/problem+json", .cacheControl: "no-store"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(data: data)))
    }
}

extension Response {
    /// A JSON response from an `Encodable` value, never cached.
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try JSONCoding.encoder().encode(value)
        return Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(data: data)))
    }
}
