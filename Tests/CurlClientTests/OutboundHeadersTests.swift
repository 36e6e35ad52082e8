import Testing

@testable import CurlClient

/// Header look-ups compare names as HTTP does: ASCII letters without case, nothing else.
@Suite("Outbound headers")
struct OutboundHeadersTests {
    @Test("look-ups, lists and removals ignore the case of ASCII letters, and keep the fields' order")
    func asciiCaseIsIgnored() {
        var headers: OutboundHeaders = ["Content-Type": "application/json", "X-RateLimit-Remaining": "5", "link": "<a>", "LINK": "<b>"]
        #expect(headers["content-type"] == "application/json")
        #expect(headers["CONTENT-TYPE"] == "application/json")
        #expect(headers["x-ratelimit-remaining"] == "5")
        #expect(headers.values("Link") == ["<a>", "<b>"])
        #expect(headers["content-typ"] == nil)
        headers.set("Content-type", "text/plain")
        #expect(headers.values("content-type") == ["text/plain"])
        headers.remove("lInK")
        #expect(headers.map(\.name) == ["X-RateLimit-Remaining", "Content-type"])
    }

    @Test("a name is not another under Unicode's case mapping: a Kelvin sign is not a k")
    func unicodeCaseIsNot() {
        let headers: OutboundHeaders = ["Lin\u{212A}": "<https://evil.example>"]
        #expect(headers["link"] == nil)
        #expect(headers.values("link").isEmpty)
        #expect(OutboundHeaders.sameName("Lin\u{212A}", "link") == false)
    }

    @Test("a name in lower case: ASCII letters lowered, the same string when there is nothing to lower")
    func lowercasedNames() {
        #expect(OutboundHeaders.lowercasedName("X-RateLimit-Remaining") == "x-ratelimit-remaining")
        #expect(OutboundHeaders.lowercasedName("etag") == "etag")
        #expect(OutboundHeaders.lowercasedName("Lin\u{212A}") == "lin\u{212A}")
        #expect(OutboundHeaders.lowercasedName("Ä-Name") == "Ä-name")
        #expect(OutboundHeaders.lowercasedName("") == "")
        // Long enough to live on the heap: the unchanged name is the same storage, not a copy.
        let long = "x-github-request-id-" + String(repeating: "a", count: 40)
        let original = long.utf8.withContiguousStorageIfAvailable(\.baseAddress)
        let lowered = OutboundHeaders.lowercasedName(long).utf8.withContiguousStorageIfAvailable(\.baseAddress)
        #expect(original != nil)
        #expect(lowered == original)
    }
}
