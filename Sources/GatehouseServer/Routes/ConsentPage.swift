import GatehouseCore
import HTTPTypes
import Hummingbird

/// The page that asks the user whether a native or desktop app may have a sign-in
/// (`ConsentRequest`), on the gateway's own origin: plain HTML, no script, two submit buttons
/// posting the one-time token to `POST /v1/auth/consent`. It cannot be framed
/// (`frame-ancestors 'none'`), so no other page can trick a click on it.
enum ConsentPage {
    /// The page's policy: nothing loads, nothing frames it, forms post only to the gateway.
    static let contentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"

    /// The page's `Referrer-Policy`, which `SecurityHeaders` keeps: under the `no-referrer` of
    /// the other sign-in answers, browsers send `Origin: null` with the page's form post
    /// (Fetch's "append a request `Origin` header"), which the consent route must refuse.
    /// `strict-origin` sends the gateway's origin, never the page's URL (the callback's, with
    /// the provider's code and state, which a proxy's log would keep).
    static let referrerPolicy = "strict-origin"

    /// The page as a `200` answer.
    static func response(_ consent: ConsentRequest) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .contentSecurityPolicy: contentSecurityPolicy,
                HTTPField.Name("X-Frame-Options")!: "DENY", .referrerPolicy: referrerPolicy,
            ],
            body: ResponseBody(byteBuffer: ByteBuffer(string: html(consent))))
    }

    /// The page's HTML; every value from a provider or a caller is escaped.
    static func html(_ consent: ConsentRequest) -> String {
        let app =
            consent.appName.map { "\(HTMLText.escape($0)) (<code>\(HTMLText.escape(consent.returnTo))</code>)" }
            ?? "<code>\(HTMLText.escape(consent.returnTo))</code>"
        let action: String
        let target = consent.targetAccount.map { "<strong>\(HTMLText.escape($0))</strong>" } ?? "an account"
        switch consent.mode {
        case .signIn: action = "sign in as"
        case .link: action = "add this sign-in to the account \(target):"
        case .reauthenticate: action = "confirm the sign-in of the account \(target) as"
        }
        let warning =
            consent.mode == .link
            ? "<p>Continue only if \(target) is your own account: whoever holds it will be able to sign in with this identity.</p>\n" : ""
        return """
            <!doctype html>
            <html lang="en">
            <head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Continue to the app?</title></head>
            <body>
            <main>
            <h1>Continue to the app?</h1>
            <p>The app <strong>\(app)</strong> asks to \(action) <strong>\(HTMLText.escape(consent.account))</strong> (\(HTMLText.escape(consent.providerId))).</p>
            <p>\(caution(consent.returnTo))</p>
            \(warning)<p>Continue only if you started this in that app just now. If you did not, choose Cancel: nothing is stored.</p>
            <form method="post" action="/v1/auth/consent">
            <input type="hidden" name="consent" value="\(HTMLText.escape(consent.token))">
            <button type="submit" name="decision" value="continue">Continue</button>
            <button type="submit" name="decision" value="cancel">Cancel</button>
            </form>
            </main>
            </body>
            </html>

            """
    }

    /// Who could be at an app's return address, escaped: the name configured for it is what the
    /// address is registered as, not proof of which program receives the sign-in. A loopback
    /// address is any program's that listens on that port; a private-use scheme any app's that
    /// registers it.
    static func caution(_ returnTo: String) -> String {
        // The address as written (scheme, host and port), so an IPv6 host keeps its brackets.
        if returnTo.hasPrefix("http://") {
            let authority = returnTo.dropFirst("http://".count).prefix { !"/?#".contains($0) }
            return "Any program on this computer can listen at <code>\(HTMLText.escape("http://" + authority))</code>: "
                + "the gateway cannot tell which one will receive this sign-in."
        }
        let scheme = returnTo.prefix { $0 != ":" }
        return "Any app on this device can register <code>\(HTMLText.escape(String(scheme))):</code>: "
            + "the gateway cannot tell which one will receive this sign-in."
    }
}
