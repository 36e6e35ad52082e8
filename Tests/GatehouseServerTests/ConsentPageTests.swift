import Testing

@testable import GatehouseServer

/// The consent page's words about who could be at an app's return address.
@Suite struct ConsentPageTests {
    @Test("the caution names the return's address as written, IPv6 loopback included, escaped; a scheme by its name")
    func cautionNamesTheAddress() {
        let cases = [
            ("http://127.0.0.1:53124/callback", "Any program on this computer can listen at <code>http://127.0.0.1:53124</code>"),
            ("http://[::1]:6000/cb?x=1", "Any program on this computer can listen at <code>http://[::1]:6000</code>"),
            ("com.example.app:/oauth2redirect", "Any app on this device can register <code>com.example.app:</code>"),
            ("x-<b>:/cb", "Any app on this device can register <code>x-&lt;b&gt;:</code>"),
        ]
        for (returnTo, expected) in cases {
            #expect(ConsentPage.caution(returnTo).hasPrefix(expected), "\(returnTo): \(ConsentPage.caution(returnTo))")
        }
    }

    @Test(
        "escaped scalar by scalar: a <, > or \" that shares a character with a scalar before it (U+0600) or after it (a combining mark) is escaped too"
    )
    func escapesJoinedScalars() {
        let text = "\u{600}<h1 id=\u{600}\"x\u{600}\">a\u{301}&<\u{338}'\u{301}"
        let escaped = HTMLText.escape(text)
        let detail: Comment = "\(escaped.unicodeScalars.map { String($0.value, radix: 16) })"
        #expect(
            escaped == "\u{600}&lt;h1 id=\u{600}&quot;x\u{600}&quot;&gt;a\u{301}&amp;&lt;\u{338}&#39;\u{301}",
            detail)
        let holds = !escaped.unicodeScalars.contains { "<>\"'".unicodeScalars.contains($0) }
        #expect(holds)
    }

    @Test(
        "directional overrides, embeddings and isolates (U+202A–U+202E, U+2066–U+2069) show as U+FFFD: a name cannot reorder the words around it"
    )
    func neutralizesDirectionalControls() {
        // "…@example.com" written backwards behind a right-to-left override reads as another address.
        let spoof = "moc.elpmaxe@mitciv\u{202E}x\u{2066}y\u{2069}\u{202A}\u{202B}\u{202C}\u{202D}\u{2067}\u{2068}"
        #expect(HTMLText.escape(spoof) == "moc.elpmaxe@mitciv\u{FFFD}x\u{FFFD}y" + String(repeating: "\u{FFFD}", count: 7))
        // Right-to-left text itself, and its marks, stay.
        #expect(HTMLText.escape("שלום\u{200F} עולם") == "שלום\u{200F} עולם")
    }
}
