import Foundation

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

/// A sign-in to open in the system's authentication session (`ASWebAuthenticationSession`,
/// or the default browser for a desktop app): the start URL, and the verifier that alone
/// redeems its result (it never leaves the app).
public struct SignInRequest: Sendable, Equatable {
    /// The URL to open.
    public let url: URL
    /// Where the gateway sends the browser back (the app's scheme or loopback address).
    public let returnTo: String
    /// The result verifier (43 random base64url characters).
    public let verifier: String

    /// A fresh result verifier and its S256 challenge.
    static func verifierAndChallenge() -> (verifier: String, challenge: String) {
        var random = SystemRandomNumberGenerator()
        let verifier = Base64URL.encode(Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &random) }))
        return (verifier, Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8)))))
    }

    /// A request the gateway made (an app's one-time start URL for a link or re-authentication).
    init(url: URL, returnTo: String, verifier: String) {
        self.url = url
        self.returnTo = returnTo
        self.verifier = verifier
    }

    /// A request with a fresh verifier.
    init(baseURL: URL, providerId: String, returnTo: String, scopes: [String], customParameters: [String: String]) throws {
        try GatehouseClient.checkTransport(baseURL)
        let (verifier, challenge) = Self.verifierAndChallenge()
        var items = [URLQueryItem(name: "return_to", value: returnTo), URLQueryItem(name: "result_challenge", value: challenge)]
        if !scopes.isEmpty { items.append(URLQueryItem(name: "scope", value: scopes.joined(separator: " "))) }
        for (name, value) in customParameters.sorted(by: { $0.key < $1.key }) { items.append(URLQueryItem(name: name, value: value)) }
        guard var components = URLComponents(url: baseURL.appendingPathComponent("v1/auth/\(providerId)/start"), resolvingAgainstBaseURL: false)
        else { throw GatehouseClientError.invalidArgument("cannot build a start URL for \(providerId)") }
        components.queryItems = items
        // `+` is a space to form decoders: encode it, as URLComponents does not.
        let query = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        components.percentEncodedQuery = query
        guard let url = components.url else { throw GatehouseClientError.invalidArgument("cannot build a start URL for \(providerId)") }
        self.url = url
        self.returnTo = returnTo
        self.verifier = verifier
    }

    /// The result id the gateway added to the URL the app was called back with (in its
    /// fragment, or for a loopback return in its query); throws `invalidCallback` for a URL
    /// that is not this request's return address.
    public func resultID(from callback: URL) throws -> String {
        let text = callback.absoluteString
        // The gateway answers `return_to` (without its fragment) + `#gatehouse_result=…`, or
        // for a loopback return + `?gatehouse_result=…` (`&…` after a query of its own).
        let base = returnTo.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard text.utf8.count > base.utf8.count, text.lowercased().hasPrefix(base.lowercased()) else {
            throw GatehouseClientError.invalidCallback
        }
        let rest = text.dropFirst(base.count)
        guard let separator = rest.first, separator == "#" || separator == (base.contains("?") ? "&" : "?") else {
            throw GatehouseClientError.invalidCallback
        }
        let added = rest.dropFirst().split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        for pair in added.split(separator: "&") where pair.hasPrefix("gatehouse_result=") {
            let id = String(pair.dropFirst("gatehouse_result=".count))
            if !id.isEmpty { return id }
        }
        throw GatehouseClientError.invalidCallback
    }
}

/// base64url without padding (RFC 4648 §5).
enum Base64URL {
    static func encode(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
