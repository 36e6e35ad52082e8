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
        // A dot segment beside an escape that is not UTF-8 or not an escape at all: browsers
        // still read `%2e%2e` as `..`.
        "http://127.0.0.1:3000/account/%2e%2e/%ff",
        "http://127.0.0.1:3000/account/%2e%2e/%zz/admin",
        "http://127.0.0.1:3000/account/.%2E/admin%",
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

/// Return addresses of native and desktop apps (RFC 8252 §7): private-use schemes in
/// reverse-domain form, and loopback redirects on any port.
@Suite struct NativeReturnAddressTests {
    let policy = ReturnToPolicy(allowList: [
        "https://app.example/", "http://127.0.0.1:3000/account", "com.example.app:/oauth2redirect", "http://127.0.0.1/callback",
        "http://[::1]/callback",
    ])

    @Test(arguments: [
        ("com.example.app:/oauth2redirect", ReturnToPolicy.Kind.privateUseScheme),
        ("com.example.app:/oauth2redirect/github.com?flow=1", .privateUseScheme),
        ("COM.Example.App:/oauth2redirect", .privateUseScheme),
        ("http://127.0.0.1:53124/callback", .loopback),
        ("http://127.0.0.1/callback", .loopback),
        ("http://127.0.0.1:8400/callback/done?x=1", .loopback),
        ("http://[::1]:6000/callback", .loopback),
        ("http://127.0.0.1:3000/account", .web),
        ("https://app.example/x", .web),
    ])
    func allowed(_ url: String, _ kind: ReturnToPolicy.Kind) throws {
        #expect(try policy.check(url) == kind)
        #expect(kind.isNative == (kind != .web))
    }

    @Test(arguments: [
        "com.example.app:/other",
        "com.example.app:/oauth2redirectx",
        "com.example.app:/oauth2redirect/../x",
        "com.example.app:/oauth2redirect/%2e%2e/x",
        "com.example.app:/oauth2redirect/%2e%2e/%ff",
        "com.example.app:/oauth2redirect/.%2E/%zz",
        "com.example.app://user@host/oauth2redirect",
        "com.example.app:\\oauth2redirect",
        "com.example.evil:/oauth2redirect",
        "myapp://auth",
        "javascript:alert(1)",
        "data:text/html,<script>x</script>",
        "file:///etc/passwd",
        "blob:https://app.example/4f1e",
        "http://localhost:5000/callback",
        "http://127.0.0.2:5000/callback",
        "http://127.0.0.1:5000/callbackx",
        "http://user@127.0.0.1:5000/callback",
        "http://10.0.0.1/callback",
        "https://127.0.0.1:5000/callback",
        "http://[::1]:6000/other",
    ])
    func refused(_ url: String) {
        let error = #expect(throws: GatehouseError.self) { try policy.check(url) }
        #expect(error?.code == .invalidReturnTo)
    }

    @Test(
        "a page served over plain http on this machine (a loopback address with its port, localhost) is an allow-list entry only in development mode: whatever listens there would get results without a consent page"
    )
    func plainHTTPPagesNeedDevelopmentMode() throws {
        for page in ["http://127.0.0.1:3000/", "http://[::1]:8080/app", "http://localhost:3000/", "http://localhost/signed-in"] {
            var configuration = GatewayConfiguration(publicURL: "https://gw.example", returnToAllowList: [page])
            let error = #expect(throws: GatehouseError.self, "\(page)") { try configuration.validate() }
            #expect(error?.detail.contains("GATEHOUSE_DEVELOPMENT") == true, "\(String(describing: error))")
            configuration.developmentMode = true
            configuration.publicURL = "http://127.0.0.1:8080"
            #expect(throws: Never.self, "\(page)") { try configuration.validate() }
            #expect(ReturnToPolicy(allowList: [page]).kind(of: page) == .web)
        }
    }

    @Test(
        "development mode is for a gateway on this machine alone: with a public URL that names no loopback address the configuration is refused, since it would drop the cookies' Secure and __Host- and admit photos at private addresses"
    )
    func developmentModeNeedsALoopbackPublicURL() throws {
        for publicURL in ["https://auth.example.com", "https://10.0.0.7:8443", "http://auth.example.com", "http://10.0.0.7:8080"] {
            var configuration = GatewayConfiguration(publicURL: publicURL, returnToAllowList: [], developmentMode: true)
            let error = #expect(throws: GatehouseError.self, "\(publicURL)") { try configuration.validate() }
            // Plain http elsewhere than loopback was refused before, as any provider URL is.
            let said =
                publicURL.hasPrefix("https")
                ? "GATEHOUSE_DEVELOPMENT=true is for a gateway on this machine" : "plain http is allowed only to loopback"
            #expect(error?.detail.contains(said) == true, "\(String(describing: error))")
            configuration.developmentMode = false
            if publicURL.hasPrefix("https") { #expect(throws: Never.self, "\(publicURL)") { try configuration.validate() } }
        }
        // A local TLS proxy in front (https to loopback) is this machine's too.
        for publicURL in ["http://127.0.0.1:8080", "http://[::1]:8080", "http://localhost:8080", "https://127.0.0.1:8443", "https://localhost"] {
            let configuration = GatewayConfiguration(publicURL: publicURL, returnToAllowList: [], developmentMode: true)
            #expect(throws: Never.self, "\(publicURL)") { try configuration.validate() }
        }
    }

    @Test(
        "GATEHOUSE_ALLOWED_ORIGINS: each entry is an origin as browsers send it, https outside development mode; any other entry, which would match nothing, is refused with the form to write"
    )
    func allowedOrigins() throws {
        let refused = [
            ("https://app.example.com/", "write https://app.example.com"), ("https://app.example.com:443", "write https://app.example.com"),
            ("https://App.Example.com", "write https://app.example.com"), ("https://app.example.com/login", "write https://app.example.com"),
            ("app.example.com", "not an origin"), ("https://user@app.example.com", "not an origin"),
            ("http://app.example.com", "plain http"), ("http://127.0.0.1:3000", "plain http"),
            // IPv6 literals as browsers write them: the first longest zero run as `::`, lowercase.
            ("https://[0:0:0:0:0:0:0:1]", "write https://[::1]"), ("https://[2001:DB8::1]", "write https://[2001:db8::1]"),
            ("https://[2001:db8:0:0:1:0:0:1]", "write https://[2001:db8::1:0:0:1]"), ("https://[::ffff:1.2.3.4]", "write https://[::ffff:102:304]"),
            ("https://[::1", "not an origin"), ("https://[::1]x", "not an origin"), ("https://app[1].example", "not an origin"),
            ("https://[not:an:address]", "not an origin"),
        ]
        for (entry, said) in refused {
            var configuration = GatewayConfiguration(publicURL: "https://gw.example", returnToAllowList: [])
            configuration.allowedOrigins = [entry]
            let error = #expect(throws: GatehouseError.self, "\(entry)") { try configuration.validate() }
            #expect(error?.code == .invalidArgument && error?.detail.contains(said) == true, "\(entry): \(String(describing: error))")
        }
        for entry in ["https://app.example.com", "https://app.example.com:8443", "https://[2001:db8::1]"] {
            var configuration = GatewayConfiguration(publicURL: "https://gw.example", returnToAllowList: [])
            configuration.allowedOrigins = [entry]
            #expect(throws: Never.self, "\(entry)") { try configuration.validate() }
        }
        var development = GatewayConfiguration(publicURL: "http://127.0.0.1:8080", returnToAllowList: [], developmentMode: true)
        development.allowedOrigins = ["http://127.0.0.1:3000"]
        #expect(throws: Never.self) { try development.validate() }
    }

    @Test(
        "an IPv6 literal matches however it is written: an entry and a URL naming one address in two forms are one host; a bracket outside a literal is refused"
    )
    func ipv6Literals() {
        let policy = ReturnToPolicy(allowList: ["http://[0:0:0:0:0:0:0:1]/cb", "https://[2001:DB8:0::1]:8443/app"])
        #expect(policy.kind(of: "http://[::1]/cb") != nil)
        #expect(policy.kind(of: "https://[2001:db8::1]:8443/app/page") != nil)
        #expect(policy.kind(of: "https://[2001:db8::2]:8443/app") == nil)
        #expect(URLAllowList.webOrigin(of: "https://[2001:0DB8::0001]/x") == "https://[2001:db8::1]")
        for refused in ["https://app[1].example/", "https://[::1/", "https://[::1]]/", "https://::1/"] {
            #expect(URLAllowList.webOrigin(of: refused) == nil, "\(refused)")
        }
    }

    @Test("allow-list entries: private-use schemes need a dot and must not be a browser scheme; plain http only to loopback")
    func entries() throws {
        for good in ["com.example.app:/oauth2redirect", "http://127.0.0.1/callback", "http://[::1]/cb", "https://app.example/"] {
            var configuration = GatewayConfiguration(publicURL: "https://gw.example", returnToAllowList: [good])
            #expect(throws: Never.self) { try configuration.validate() }
            configuration.returnToAllowList = []
        }
        for bad in [
            "myapp://auth", "javascript:alert(1)", "data:text/html,x", "file:///etc", "blob:https://a.example/x", "http://app.example/",
            "com.example.app://user@x/cb", "about:blank", "vbscript:x.y",
        ] {
            let configuration = GatewayConfiguration(publicURL: "https://gw.example", returnToAllowList: [bad])
            #expect(throws: GatehouseError.self, "\(bad)") { try configuration.validate() }
        }
        // Native addresses are no browser origins: they open no CORS door.
        let configuration = GatewayConfiguration(
            publicURL: "https://gw.example", returnToAllowList: ["com.example.app:/cb", "http://127.0.0.1/callback", "https://app.example/"])
        #expect(configuration.browserOrigins == ["https://app.example", "https://gw.example"])
    }
}
