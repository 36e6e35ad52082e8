import Foundation
import Testing

@testable import GatehouseCore

/// `EmailAddress.normalized`: the byte path for ASCII answers exactly as the general one.
struct EmailAddressTests {
    @Test(
        "examples: trimmed and lower-cased; several or no @, an empty side, a dot next to the domain's ends, inner spaces or control characters refused"
    )
    func examples() {
        #expect(EmailAddress.normalized("  Ada@Example.COM\n") == "ada@example.com")
        #expect(EmailAddress.normalized("Ä@example.com") == "ä@example.com")
        for refused in ["", "ada", "@example.com", "ada@", "a@b@c", "ada@.example.com", "ada@example.com.", "a da@x.y", "ada@x\u{7F}.y", "ada@x\ty"] {
            #expect(EmailAddress.normalized(refused) == nil, "\(refused.debugDescription)")
        }
    }

    @Test("20 000 random ASCII strings (letters, @, dots, every kind of white space and control character): the byte path and the general path agree")
    func asciiPathAgrees() {
        var generator = SplitMix(seed: 20_261_125)
        let alphabet = Array("aZ9@.@.-_+ \t\n\r\u{0B}\u{0C}\u{00}\u{1F}\u{7F}\r\nQx").map(String.init)
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            #expect(EmailAddress.normalizedASCII(text) == EmailAddress.normalizedText(text), "\(text.debugDescription)")
        }
        let long = String(repeating: "a", count: 310) + "@example.com"
        #expect(EmailAddress.normalizedASCII(long) == EmailAddress.normalizedText(long))
        #expect(EmailAddress.normalized(long) == nil)
    }
}
