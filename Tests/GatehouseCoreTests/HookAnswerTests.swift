import Foundation
import Testing

@testable import GatehouseCore

/// The hook answer's strict schema, custom claims' rules and the hook settings' checks.
@Suite struct HookAnswerTests {
    static func answer(_ json: String) throws -> HookAnswer {
        try HookAnswer(body: Array(json.utf8))
    }

    @Test(
        "customClaims may echo the account's stored claims as they are, a name reserved since or a value the rules refuse now included; anything changed or new is checked"
    )
    func storedClaimsEchoBack() throws {
        let deep = #"{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":1}}}}}}}}}"#
        let stored: [String: JSONValue] = [
            "Sub": .string("x"), "big": .number(9_007_199_254_740_994), "deep": try JSONValue.parse(Data(deep.utf8)), "role": .string("a"),
        ]
        let echo = #"{"decision":"allow","customClaims":{"Sub":"x","big":9007199254740994,"deep":\#(deep),"role":"b"}}"#
        guard case .allow(let allowance) = try HookAnswer(body: Array(echo.utf8), accountClaims: stored) else {
            Issue.record("not an allow")
            return
        }
        #expect(allowance.customClaims?.members["Sub"] == .string("x") && allowance.customClaims?.members["role"] == .string("b"))
        // Without them, or changed, each is refused as before.
        #expect(throws: HookFailure.self) { try HookAnswer(body: Array(echo.utf8)) }
        for changed in [
            #"{"Sub":"y"}"#, #"{"big":9007199254740996}"#, #"{"deep":{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":2}}}}}}}}}}"#, #"{"Iss":"x"}"#,
        ] {
            let body = #"{"decision":"allow","customClaims":\#(changed)}"#
            #expect(throws: HookFailure.self, "\(changed)") { try HookAnswer(body: Array(body.utf8), accountClaims: stored) }
        }
        // They still count in the size.
        let large: [String: JSONValue] = ["Sub": .string(String(repeating: "x", count: 990))]
        let grown = #"{"decision":"allow","customClaims":{"Sub":"\#(String(repeating: "x", count: 990))","role":"abcdefghij"}}"#
        #expect(throws: HookFailure.self) { try HookAnswer(body: Array(grown.utf8), accountClaims: large) }
    }

    @Test("allow and deny answers are read; any other shape is a malformed answer naming what is wrong")
    func strictSchema() throws {
        #expect(try Self.answer(#"{"decision":"allow"}"#) == .allow(.nothing))
        guard case .allow(let allowance) = try Self.answer(#"{"decision":"allow","customClaims":{"role":"admin"},"sessionClaims":{}}"#) else {
            Issue.record("not an allow")
            return
        }
        #expect(allowance.customClaims?.members == ["role": .string("admin")])
        #expect(allowance.sessionClaims?.isEmpty == true)
        #expect(try Self.answer(#"{"decision":"deny","message":"  Go away.  "}"#) == .deny(message: "Go away."))
        // Controls and bidirectional overrides go: a message cannot reorder the page's text
        // around it ("\u202E" would show "Your account exe.txt" for "Your account txt.exe").
        let reordered = #"{"decision":"deny","message":"Refused\u0007 \u202Etxt.exe\u202C \u2066x\u2069 \u200Fy"}"#
        #expect(try Self.answer(reordered) == .deny(message: "Refused txt.exe x y"))
        // A receiver meaning to refuse is never read as a failure (which `allow` would let through).
        for json in [#"{"decision":"deny"}"#, #"{"decision":"DENY","message":null}"#, #"{"decision":"deny","reason":"x","message":"No."}"#] {
            guard case .deny(let message) = try Self.answer(json) else {
                Issue.record("\(json) is not a denial")
                continue
            }
            #expect(!message.isEmpty)
        }
        let long = String(repeating: "é", count: 400)
        #expect(try Self.answer(#"{"decision":"deny","message":"\#(long)"}"#) == .deny(message: String(long.prefix(256))))
        // One character of 8 KB (a letter and 4,000 combining marks) is held to 1 KB.
        let heavy = "a" + String(repeating: "\u{0301}", count: 4_000)
        guard case .deny(let cut) = try Self.answer(#"{"decision":"deny","message":"\#(heavy)"}"#) else {
            Issue.record("not a denial")
            return
        }
        #expect((1_000...1_024).contains(cut.utf8.count) && cut.unicodeScalars.first == "a", "\(cut.utf8.count) bytes")
        let malformed: [(String, String)] = [
            ("[]", "not a JSON object"), (#"{"decision":true}"#, "decision is missing"), (#"{"decision":"maybe"}"#, "allow or deny"),
            (#"{"decision":"allow","message":"x"}"#, "unknown member"), (#"{"decision":"allow","customClaims":[1]}"#, "object"),
            (#"{"decision":"allow","sessionClaims":{"exp":1}}"#, "reserved"),
        ]
        for (json, reason) in malformed {
            #expect(throws: HookFailure.self, "\(json)") { try Self.answer(json) }
            do {
                _ = try Self.answer(json)
            } catch let failure as HookFailure {
                #expect(failure.reason.contains(reason), "\(json): \(failure.reason)")
            }
        }
    }

    @Test("custom claims: the names a consumer comparing without case reads as another, and removing a name removes them too")
    func caseFoldedNames() throws {
        let claims = try CustomClaims(["staff": .bool(true), "STAFF": .bool(true), "Sta\u{FB00}": .bool(true), "plan": .string("pro")])
        #expect(claims.readingAs("staff") == ["STAFF", "Sta\u{FB00}"])
        #expect(claims.readingAs("plan").isEmpty)
        #expect(Array(claims.removing("staff").members.keys) == ["plan"])
        #expect(Array(claims.removing("Staff").members.keys) == ["plan"])
    }

    @Test("custom claims: reserved names, gatehouse…, size and depth")
    func claimRules() throws {
        #expect(throws: GatehouseError.self) { try CustomClaims(["GATEHOUSE": .bool(true)]) }
        #expect(throws: GatehouseError.self) { try CustomClaims(["Sub": .string("x")]) }
        #expect(throws: GatehouseError.self) { try CustomClaims(["EMAIL": .string("x")]) }
        // Names that other languages' case-insensitive comparisons take for reserved ones:
        // U+017F (long s) folds to s, U+0131 (dotless i) and U+0130 to i; and `gatehouse` with a
        // mark or a joiner after it still starts with `gatehouse`.
        // U+1E9E (capital sharp s) lower-cases to U+00DF, which folds to ss (Python's casefold).
        // Firebase's own claims (`firebase`, `user_id`; its Admin SDK's `uid`) are reserved too.
        for name in [
            "\u{17F}ub", "\u{131}ss", "\u{130}SS", "gatehou\u{17F}e_role", "\u{17F}id", "gatehouse\u{301}_role", "gatehouse\u{200D}x",
            "addre\u{1E9E}", "ADDRE\u{DF}", "firebase", "Firebase", "user_id", "uid", "UID",
        ] {
            let detail: Comment = "\(name.unicodeScalars.map { String($0.value, radix: 16) })"
            #expect(throws: GatehouseError.self, detail) {
                try CustomClaims([name: .string("x")])
            }
        }
        #expect(try CustomClaims(["r\u{F4}le": .string("x"), "\u{30B0}\u{30EB}\u{30FC}\u{30D7}": .string("y")]).members.count == 2)
        #expect(throws: GatehouseError.self) { try CustomClaims(["": .bool(true)]) }
        #expect(throws: GatehouseError.self) { try CustomClaims(["big": .string(String(repeating: "x", count: 991))]) }
        #expect(try CustomClaims(["big": .string(String(repeating: "x", count: 990))]).members.count == 1, "exactly 1,000 bytes")
        var value = JSONValue.number(1)
        for _ in 0..<8 { value = .array([value]) }
        #expect(try CustomClaims(["deep": value]).members.count == 1)
        #expect(throws: GatehouseError.self) { try CustomClaims(["deep": .object(["a": value])]) }
        let merged = try CustomClaims(["a": .number(1), "b": .number(2)]).merging(try CustomClaims(["b": .number(3)]))
        #expect(merged?.members == ["a": .number(1), "b": .number(3)])
        let half = try CustomClaims(["x": .string(String(repeating: "x", count: 600))])
        let other = try CustomClaims(["y": .string(String(repeating: "y", count: 600))])
        #expect(half.merging(other) == nil, "a union past 1,000 bytes is none")
        #expect(CustomClaims(stored: nil).isEmpty && CustomClaims.empty.stored == nil)
    }

    @Test("hook settings: a secret is required, whsec_ secrets, https or loopback http, a timeout of at most 10 s")
    func settings() {
        let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()
        func problem(_ url: String, secrets: [String]? = nil, timeout: TimeInterval = 2) -> String? {
            HookConfiguration(urls: [.beforeSignIn: url], secrets: secrets ?? [secret], timeout: timeout).problem()
        }
        #expect(problem("https://app.example.com/hooks") == nil)
        #expect(problem("http://127.0.0.1:9000/hooks") == nil)
        #expect(problem("http://[::1]:9000/hooks") == nil)
        #expect(problem("http://app.example.com/hooks") != nil)
        #expect(problem("http://127.attacker.example/hooks") != nil)
        #expect(problem("https://user:pw@app.example.com/hooks") != nil)
        #expect(problem("ftp://app.example.com/hooks") != nil)
        #expect(problem("https://app.example.com/hooks", secrets: []) != nil)
        #expect(problem("https://app.example.com/hooks", secrets: ["not-a-secret"]) != nil)
        #expect(problem("https://app.example.com/hooks", timeout: 11) != nil)
        #expect(HookConfiguration(urls: [:], secrets: []).problem() == nil)
    }

    @Test("the return_to origin the hook is told")
    func origins() {
        #expect(SignInOrigin.origin(of: "https://App.Example.com:8443/signed-in?x=1") == "https://app.example.com:8443")
        #expect(SignInOrigin.origin(of: "com.example.app:/oauth2redirect") == "com.example.app:")
        #expect(SignInOrigin.origin(of: "http://127.0.0.1:53124/callback") == "http://127.0.0.1:53124")
    }
}
