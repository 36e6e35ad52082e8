import Foundation
import Testing

@testable import GatehouseCore

/// PKCE, base64url, form encoding and custom-parameter rules.
@Suite struct EncodingTests {
    /// RFC 7636 Appendix B's example verifier and challenge.
    @Test func pkceMatchesRFC7636AppendixB() {
        #expect(PKCE.challenge(for: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let fresh = PKCE()
        #expect(fresh.verifier.count == 43)
        #expect(fresh.challenge == PKCE.challenge(for: fresh.verifier))
        #expect(PKCE().verifier != fresh.verifier)
    }

    @Test func base64URLRoundTripsWithoutPadding() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == Data(bytes))
        }
        #expect(Base64URL.decode("not base64!") == nil)
    }

    /// The hand-written encoder agrees with Foundation's base64 (alphabet swapped, padding
    /// dropped) on every length and on random bytes, through arrays and other sequences.
    @Test func base64URLAgreesWithFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(Base64URL.encode(Data(bytes)) == expected)
            let holds = Base64URL.encode(bytes.lazy.map { $0 }) == expected
            #expect(holds)
        }
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
    }

    @Test func formEncodingRoundTrips() {
        let pairs = [("redirect_uri", "http://127.0.0.1:8080/cb?a=1&b=2"), ("name", "Ada Lovelace"), ("empty", ""), ("ü", "ß+&=")]
        let encoded = FormEncoding.encode(pairs)
        #expect(encoded.contains("Ada%20Lovelace"))
        #expect(!encoded.contains("?"))
        let decoded = FormEncoding.decode(encoded)
        #expect(decoded.map(\.0) == pairs.map(\.0))
        #expect(decoded.map(\.1) == pairs.map(\.1))
        let holds = FormEncoding.decode("a=b+c&flag&bad=%zz").map { "\($0.0)=\($0.1)" } == ["a=b c", "flag=", "bad=%zz"]
        #expect(holds)
    }

    @Test("a query's first value of each name; pairs split at the bytes & and =, empty parts skipped")
    func formEncodingFirstValues() {
        #expect(FormEncoding.firstValues("refresh=true") == ["refresh": "true"])
        #expect(FormEncoding.firstValues("&&a=1&a=2&=x&b&c=d=e&%61=3&") == ["a": "1", "": "x", "b": "", "c": "d=e"])
        #expect(FormEncoding.firstValues("") == [:])
        // A combining mark after `&` is one Character with it, but the query splits at the byte.
        #expect(FormEncoding.decode("a=1&\u{301}b=2").map(\.0) == ["a", "\u{301}b"])
        #expect(FormEncoding.decode("a=1&\u{301}b=2").map(\.1) == ["1", "2"])
        #expect(FormEncoding.decode("x=%E2%9C%93&y=caf%C3%A9").map(\.1) == ["✓", "café"])
    }

    @Test func customParametersForwardOnlyWhatIsAllowed() throws {
        let forwarded = try CustomParameters.forwardable(from: [
            ("return_to", "https://app.example/"), ("scope", "repo"), ("login", "octocat"), ("allow_signup", "false"),
        ])
        #expect(forwarded.map(\.0) == ["login", "allow_signup"])
        for reserved in ["state", "client_id", "REDIRECT_URI", "code_challenge", "nonce", "response_mode"] {
            #expect(throws: GatehouseError.self) { try CustomParameters.forwardable(from: [(reserved, "x")]) }
        }
        #expect(throws: GatehouseError.self) { try CustomParameters.forwardable(from: [("x", String(repeating: "a", count: 2000))]) }
    }

    @Test func secureRandomTokensAreUniqueAndDigestsStable() {
        let tokens = Set((0..<1000).map { _ in SecureRandom.token(byteCount: 32) })
        #expect(tokens.count == 1000)
        #expect(SecureRandom.digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SecureRandom.digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SecureRandom.digest("é🙂") == "7382f537af6a53054b6a72792df00fa0be0f5d2e8214db9cd6ebbcc3d57d02b9")
    }

    @Test("text limits count bytes and cut at a scalar's boundary: a letter with 20,000 combining marks is one character but 40,001 bytes")
    func truncatedToBytes() {
        let marked = "a" + String(repeating: "\u{301}", count: 20_000)
        #expect(marked.count == 1 && String(marked.prefix(512)).utf8.count == 40_001, "why a byte limit")
        #expect(marked.truncated(toBytes: 512).utf8.count == 511, "the last whole scalar within 512 bytes")
        #expect("h\u{E9}llo".truncated(toBytes: 2) == "h", "never half of é")
        #expect("h\u{E9}llo".truncated(toBytes: 3) == "h\u{E9}")
        #expect("short".truncated(toBytes: 64) == "short")
        let use = SessionUse(at: Date(), clientAddress: "203.0.113.5", userAgent: marked)
        #expect((use.userAgent?.utf8.count ?? 0) <= 512)
        // A parameter forwarded to a provider is limited in bytes too.
        #expect(throws: GatehouseError.self) { try CustomParameters.forwardable(from: [("prompt", marked)]) }
        #expect((try? CustomParameters.forwardable(from: [("prompt", "consent")]))?.count == 1)
    }

    @Test(
        "text shown to a person: control, bidirectional and invisible format characters go (the joiners stay), line and paragraph separators read as spaces"
    )
    func displayableText() {
        #expect("olive@oidc.exa\u{200B}mple\u{FEFF}\u{2060}\u{AD}".displayable(characters: 256, bytes: 1_024) == "olive@oidc.example")
        #expect("\u{202E}moc.elpmaxe@ada\u{2066}x\u{2069}\u{200E}".displayable(characters: 256, bytes: 1_024) == "moc.elpmaxe@adax")
        #expect("Ada\u{2028}Admin\u{2029}Team\u{7}\nof\tfour".displayable(characters: 256, bytes: 1_024) == "Ada Admin Team of four")
        #expect("\u{E0041}tag".displayable(characters: 256, bytes: 1_024) == "tag")
        // Zero-width joiners spell emoji sequences and Indic conjuncts: kept.
        #expect(
            "\u{1F469}\u{200D}\u{1F4BB} \u{0915}\u{094D}\u{200C}\u{0937}".displayable(characters: 256, bytes: 1_024)
                == "\u{1F469}\u{200D}\u{1F4BB} \u{0915}\u{094D}\u{200C}\u{0937}")
        #expect(String(repeating: "x", count: 300).displayable(characters: 256, bytes: 1_024).count == 256)
    }
}
