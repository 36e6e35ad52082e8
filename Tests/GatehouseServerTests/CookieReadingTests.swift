import Hummingbird
import Testing

@testable import GatehouseServer

/// `Request.cookie(_:)` reads one cookie without Hummingbird's `Cookies`; it must find what
/// `Cookies` finds.
@Suite struct CookieReadingTests {
    @Test(
        "a cookie's value is what Hummingbird's Cookies answers, for names that prefix others, values with '=', spaces, empty values and repeated names"
    )
    func agreesWithHummingbird() {
        let fields = [
            "gh_session=abc", "gh_session_x=1; gh_session=second", " gh_session=spaced", "a=1;b=2; gh_session=x=y=z", "gh_session=",
            "gh_session", "gh_sessio=1; gh_session2=2", "\tgh_session=tab", "x=1;;gh_session=after-empty", "", ";", "=v; gh_session=w",
            "gh_session=first; gh_session=second", "gh_session=é🙂", "other=gh_session=no",
        ]
        for field in fields {
            let expected = Cookies(from: [field])["gh_session"]?.value
            #expect(Request.cookieValue(named: "gh_session", in: field) == expected, "\(field)")
        }
        #expect(Request.cookieValue(named: "gh_session", in: "a=1; gh_session=tok; b=2") == "tok")
        #expect(Request.cookieValue(named: "gh_session", in: "gh_session_x=1") == nil)
    }
}
