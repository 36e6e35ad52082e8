import HTTPTypes
import Hummingbird
import NIOCore

extension Response {
    /// How many fields the way out adds to an answer at most: `X-Content-Type-Options`,
    /// `Referrer-Policy` or `Cache-Control` with `Vary` (`SecurityHeaders`), `Vary: Origin` and
    /// CORS' three (`BrowserPolicy.decorate`), and `X-Request-Id` (`GatewayMiddleware`).
    static let fieldsAddedOnTheWayOut = 8

    /// An answer with a whole body, its fields in one allocation with room for those the way
    /// out adds, and its `Content-Length` already set.
    ///
    /// Hummingbird's initializer sets a missing `Content-Length` in its own copy of the fields,
    /// which copies their storage (the caller's value still holds it), and each field added
    /// past the storage's capacity grows it again: a JSON answer's fields were allocated four
    /// times on its way out.
    static func whole(status: HTTPResponse.Status, fields: KeyValuePairs<HTTPField.Name, String>, body: ByteBuffer) -> Response {
        var headers = HTTPFields()
        headers.reserveCapacity(fields.count + 2 + fieldsAddedOnTheWayOut)
        for (name, value) in fields { headers.append(HTTPField(name: name, value: value)) }
        headers[.contentLength] = String(body.readableBytes)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: body))
    }
}
