import GatehouseCore
import HTTPTypes

/// The cookies the gateway sets: their names and `Set-Cookie` values. `__Host-` and
/// `Secure` everywhere but in development mode, where a plain-http loopback browser would
/// drop them.
struct CookiePolicy: Sendable {
    /// `Secure` and the `__Host-` prefix are on.
    let secure: Bool
    /// The session cookie's name.
    var sessionName: String { secure ? "__Host-gatehouse-session" : "gatehouse-session" }
    /// The sign-in transaction cookie's name: it binds `state` to this browser.
    var transactionName: String { secure ? "__Host-gatehouse-tx" : "gatehouse-tx" }

    /// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Path=/, Secure when on.
    func setCookie(name: String, value: String, maxAge: Int) -> String {
        var parts = ["\(name)=\(value)", "Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=\(maxAge)"]
        if secure { parts.append("Secure") }
        return parts.joined(separator: "; ")
    }

    /// The `Set-Cookie` field of the sign-in transaction cookie holding `binding` for `maxAge` seconds.
    func transactionCookie(_ binding: String, maxAge: Int) -> HTTPField {
        HTTPField(name: .setCookie, value: setCookie(name: transactionName, value: binding, maxAge: maxAge))
    }

    /// A `Set-Cookie` value that deletes the cookie.
    func deleteCookie(name: String) -> String {
        setCookie(name: name, value: "", maxAge: 0)
    }
}

extension CookiePolicy {
    /// The policy of a configuration.
    init(_ configuration: GatewayConfiguration) {
        self.init(secure: !configuration.developmentMode)
    }
}
