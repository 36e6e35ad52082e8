import Foundation

/// Decides whether a `return_to` address is on the allow-list, and what kind of client it
/// belongs to. Three kinds of entries (RFC 8252 §7 for the native ones):
///
/// - **web**: an absolute `https` URL, or `http` to a loopback host with an explicit port (a
///   page served from this machine, such as the demo page); matched by `URLAllowList`.
/// - **private-use scheme**: `com.example.app:/oauth2redirect`, a reverse-domain scheme (at
///   least one dot, never a browser scheme such as `javascript:` or `data:`); matched on the
///   scheme and a path prefix at a segment boundary.
/// - **loopback**: `http://127.0.0.1/callback` or `http://[::1]/callback` written **without a
///   port**, for desktop apps that listen on a port picked at run time: any port of that
///   loopback address, the path under the entry's. `localhost` is not one (RFC 8252 §8.3).
///
/// An exact web entry wins over a loopback one, so a page on `http://127.0.0.1:8080/` stays a
/// web return with its session cookie.
public struct ReturnToPolicy: Sendable {
    /// What kind of client a return address belongs to.
    public enum Kind: Sendable, Equatable {
        /// A web page: the sign-in sets the session cookie.
        case web
        /// A native app's private-use URI scheme.
        case privateUseScheme
        /// A desktop app listening on a loopback port.
        case loopback

        /// Whether the address belongs to a native or desktop app (binding required, no cookie).
        public var isNative: Bool { self != .web }
    }

    private let web: URLAllowList
    private let schemes: [PrivateUseURI]
    private let loopbacks: [URLAllowList.ParsedURL]

    /// Creates the policy from allow-list entries (invalid entries are ignored;
    /// `GatewayConfiguration.validate` reports them).
    public init(allowList: [String]) {
        web = URLAllowList(allowList.filter { Self.entryKind($0) == .web })
        schemes = allowList.compactMap(PrivateUseURI.parse)
        loopbacks = allowList.filter { Self.entryKind($0) == .loopback }.compactMap(URLAllowList.parse)
    }

    /// The kind of an allowed `returnTo`; throws `invalid-return-to` unless it is allowed.
    @discardableResult
    public func check(_ returnTo: String) throws -> Kind {
        if let kind = kind(of: returnTo) { return kind }
        guard URLAllowList.parse(returnTo) != nil || PrivateUseURI.parse(returnTo) != nil else {
            throw GatehouseError.invalidReturnTo(
                "return_to must be an absolute https URL, a loopback http URL or an app's reverse-domain scheme, without credentials or unusual characters."
            )
        }
        throw GatehouseError.invalidReturnTo("return_to is not on the gateway's allow-list.")
    }

    /// The kind of `returnTo` when the allow-list admits it, else `nil`.
    public func kind(of returnTo: String) -> Kind? {
        if let url = URLAllowList.parse(returnTo) {
            if web.allows(returnTo) { return .web }
            let underLoopback = loopbacks.contains { entry in
                entry.host == url.host && url.scheme == "http" && URLAllowList.isUnder(url.path, prefix: entry.path)
            }
            return underLoopback ? .loopback : nil
        }
        if let uri = PrivateUseURI.parse(returnTo) {
            return schemes.contains { $0.scheme == uri.scheme && URLAllowList.isUnder(uri.path, prefix: $0.path) } ? .privateUseScheme : nil
        }
        return nil
    }

    /// The kind of an allow-list entry, or `nil` when it is not a usable one.
    public static func entryKind(_ entry: String) -> Kind? {
        if PrivateUseURI.parse(entry) != nil { return .privateUseScheme }
        guard let url = URLAllowList.parse(entry) else { return nil }
        if url.scheme == "https" { return .web }
        // Plain http only to this machine; written without a port, any port of a loopback IP.
        if loopbackHosts.contains(url.host), !hasExplicitPort(entry) { return .loopback }
        return loopbackHosts.contains(url.host) || url.host == "localhost" ? .web : nil
    }

    /// The browser origin of a web entry (CORS and cookie-authenticated changes); native
    /// entries have none.
    public static func webOrigin(ofEntry entry: String) -> String? {
        entryKind(entry) == .web ? URLAllowList.parse(entry)?.origin : nil
    }

    /// The strict parse `URLAllowList` uses.
    static func parse(_ text: String) -> URLAllowList.ParsedURL? { URLAllowList.parse(text) }

    /// Loopback IP literals as `URLAllowList` keeps hosts.
    private static let loopbackHosts: Set<String> = ["127.0.0.1", "[::1]"]

    /// Whether the authority of an `http(s)://` URL names a port.
    private static func hasExplicitPort(_ entry: String) -> Bool {
        let rest = entry.drop { $0 != ":" }.dropFirst(3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let afterHost = authority.hasPrefix("[") ? authority.drop { $0 != "]" }.dropFirst() : authority[...]
        return afterHost.contains(":")
    }
}

/// A private-use URI (`com.example.app:/oauth2redirect`), parsed as strictly as web URLs:
/// a reverse-domain scheme that no browser interprets, then a path without user info,
/// encoded separators, dot segments, backslashes or control characters.
struct PrivateUseURI: Equatable {
    /// The scheme, lowercased.
    var scheme: String
    /// Everything up to `?` or `#` after `scheme:` (`/oauth2redirect`, or `//host/path`).
    var path: String

    /// Schemes a browser or the platform interprets itself; never an app's.
    private static let reserved: Set<String> = [
        "http", "https", "javascript", "data", "file", "blob", "about", "vbscript", "ftp", "ws", "wss", "mailto", "tel", "sms", "chrome",
        "intent", "filesystem", "view-source",
    ]

    /// `nil` for anything that is not a usable private-use URI.
    static func parse(_ text: String) -> PrivateUseURI? {
        guard text.utf8.count <= 2048,
            !text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F || $0 == "\\" || $0.value > 0x7E }),
            let colon = text.firstIndex(of: ":")
        else { return nil }
        let scheme = text[..<colon].lowercased()
        let labels = scheme.split(separator: ".", omittingEmptySubsequences: false)
        // RFC 3986 scheme characters, in reverse-domain form: two labels at least, none empty.
        guard let first = scheme.first, first.isLetter, scheme.count <= 128, labels.count >= 2, labels.allSatisfy({ !$0.isEmpty }),
            scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "+" }),
            !reserved.contains(scheme)
        else { return nil }
        let rest = text[text.index(after: colon)...]
        let path = String(rest.prefix { $0 != "?" && $0 != "#" })
        let lowered = path.lowercased()
        guard path.hasPrefix("/"), !path.contains("@"), !lowered.contains("%2f"), !lowered.contains("%5c"), !lowered.contains("%40") else {
            return nil
        }
        guard !URLAllowList.hasDotSegment(ArraySlice(path.utf8)) else { return nil }
        return PrivateUseURI(scheme: scheme, path: path)
    }
}
