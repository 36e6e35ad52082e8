import Testing

@testable import GatehouseCore

/// The allow-list check for `return_to`: every trick that makes a browser land elsewhere is refused.
@Suite struct ReturnToPolicyTests {
    let policy = ReturnToPolicy(allowList: ["https://app.example/", "http://127.0.0.1:3000/account"])

    @Test(arguments: [
        "https://app.example/",
        "https://app.example/dashboard?tab=1#top",
        "HTTPS://APP.EXAMPLE/x",
        "https://app.example:443/x",
        "http://127.0.0.1:3000/account",
        "http://127.0.0.1:3000/account/settings",
    ])
    func allowed(_ url: String) throws {
        try policy.check(url)
    }

    @Test(arguments: [
        "//evil.example/",
        "https://evil.example/",
        "https://app.example@evil.example/",
        "https://evil.example@app.example/",
        "https://app.example.evil.example/",
        "https://app.example:8443/",
        "http://app.example/",
        "https:\\\\evil.example/",
        "https://app.example\\@evil.example/",
        "https://app.example%2F@evil.example/",
        "https://app.example/%2F%2Fevil.example",
        "https://app.example//evil.example",
        "http://127.0.0.1:3000/accountant",
        "http://127.0.0.1:3000/account/../admin",
        "http://127.0.0.1:3000/account/%2e%2e/admin",
        "https://app.example/\u{0}",
        "https://app.example/ space",
        "https://app.éxample/",
        "javascript:alert(1)",
        "/relative",
        "",
    ])
    func refused(_ url: String) {
        #expect(throws: GatehouseError.self) { try policy.check(url) }
        do {
            try policy.check(url)
        } catch let error as GatehouseError {
            #expect(error.code == .invalidReturnTo)
            #expect(error.situation == .usual)
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func parsesPortsAndDefaults() throws {
        let parsed = try #require(ReturnToPolicy.parse("https://Host.Example:8443/a/b?q#f"))
        #expect(parsed == .init(scheme: "https", host: "host.example", port: 8443, path: "/a/b"))
        #expect(ReturnToPolicy.parse("http://h")?.port == 80)
        #expect(ReturnToPolicy.parse("http://h:0/") == nil)
        #expect(ReturnToPolicy.parse("http://h:70000/") == nil)
    }
}
