import HTTPTypes
import Hummingbird
import NIOCore
import Testing

@testable import GatehouseServer

/// `Request.field(_:)` reads a header field as `HTTPFields`' subscript does, without its copy.
@Suite struct RequestFieldTests {
    static func request(_ fields: [(HTTPField.Name, String)]) -> Request {
        var headers = HTTPFields()
        for (name, value) in fields { headers.append(HTTPField(name: name, value: value)) }
        let head = HTTPRequest(method: .get, scheme: "http", authority: "gateway.test", path: "/v1/me", headerFields: headers)
        return Request(head: head, body: RequestBody(buffer: ByteBuffer()))
    }

    @Test("a field reads as the subscript reads it: absent, one value, several joined (a cookie's with '; '), names without case")
    func agreesWithTheSubscript() {
        let key = "Bearer gh_sk_" + String(repeating: "k", count: 64)
        let cases: [[(HTTPField.Name, String)]] = [
            [], [(.authorization, key)], [(.accept, "*/*")], [(.authorization, key), (.authorization, "Bearer other")],
            [(.authorization, "")], [(.cookie, "a=1"), (.accept, "*/*"), (.cookie, "b=2")], [(HTTPField.Name("AUTHORIZATION")!, key)],
        ]
        for fields in cases {
            let request = Self.request(fields)
            for name in [HTTPField.Name.authorization, .cookie, .accept] {
                #expect(request.field(name) == request.headers[name], "\(fields) \(name)")
            }
        }
        // Two credentials are one value no scheme parses, as before: the caller gets its 401.
        #expect(Self.request([(.authorization, key), (.authorization, "Bearer other")]).field(.authorization) == key + ", Bearer other")
    }

    @Test("one field's value is the field's own string, not a copy")
    func oneValueIsNotCopied() {
        let key = "Bearer gh_sk_" + String(repeating: "k", count: 64)
        let request = Self.request([(.authorization, key)])
        let stored = request.headers.first?.value.utf8.withContiguousStorageIfAvailable(\.baseAddress)
        let read = request.field(.authorization)?.utf8.withContiguousStorageIfAvailable(\.baseAddress)
        #expect(stored != nil)
        #expect(read == stored)
    }
}
