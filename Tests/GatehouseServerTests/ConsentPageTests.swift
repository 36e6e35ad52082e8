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
}
