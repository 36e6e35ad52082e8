import ArgumentParser
import GatehouseCore

/// The OpenID Connect providers of `serve`, read from the environment:
///
/// - Yahoo: `GATEHOUSE_YAHOO_CLIENT_ID`, `GATEHOUSE_YAHOO_CLIENT_SECRET`, optionally
///   `GATEHOUSE_YAHOO_ISSUER` (and `GATEHOUSE_YAHOO_LEGACY_ISSUER`) to point at an emulator.
/// - Each `oidc.<name>`: `GATEHOUSE_OIDC_<NAME>_ISSUER`, `_CLIENT_ID`, `_CLIENT_SECRET` (none:
///   ID-token sign-in only), and optionally `_AUDIENCES` (the apps' per-platform client ids),
///   `_SCOPES` (space-separated), `_AUTH_METHOD` (`client_secret_basic` or
///   `client_secret_post`), `_NONCE` (`sha256` or `raw`). `<NAME>` is upper-case in the
///   variable and lower-case in the provider id (`GATEHOUSE_OIDC_CORP_ISSUER` → `oidc.corp`).
enum OIDCSettings {
    /// The configured providers, or a validation error naming the missing variable.
    static func providers(from environment: [String: String]) throws -> [OIDCProviderConfiguration] {
        func required(_ name: String) throws -> String {
            guard let value = environment[name], !value.isEmpty else { throw ValidationError("\(name) must be set") }
            return value
        }
        var providers: [OIDCProviderConfiguration] = []
        if let clientID = environment["GATEHOUSE_YAHOO_CLIENT_ID"] {
            var yahoo = OIDCProviderConfiguration.yahoo(clientID: clientID, clientSecret: try required("GATEHOUSE_YAHOO_CLIENT_SECRET"))
            if let issuer = environment["GATEHOUSE_YAHOO_ISSUER"] {
                yahoo.issuer = issuer
                yahoo.additionalTokenIssuers = environment["GATEHOUSE_YAHOO_LEGACY_ISSUER"].map { [$0] } ?? []
            }
            if let hosts = environment["GATEHOUSE_YAHOO_PICTURE_HOSTS"] {
                yahoo.pictureURLPrefixes = try pictureHosts(hosts, "GATEHOUSE_YAHOO_PICTURE_HOSTS")
            }
            providers.append(yahoo)
        }
        let suffix = "_ISSUER"
        for key in environment.keys.sorted() where key.hasPrefix("GATEHOUSE_OIDC_") && key.hasSuffix(suffix) {
            let name = String(key.dropFirst("GATEHOUSE_OIDC_".count).dropLast(suffix.count))
            let prefix = "GATEHOUSE_OIDC_\(name)_"
            var provider = OIDCProviderConfiguration(
                providerId: "oidc." + name.lowercased().replacingOccurrences(of: "_", with: "-"), issuer: try required(key),
                // Without a secret the provider serves ID-token sign-in only.
                clientID: try required(prefix + "CLIENT_ID"), clientSecret: environment[prefix + "CLIENT_SECRET"] ?? "")
            if let audiences = environment[prefix + "AUDIENCES"] {
                provider.platformAudiences = audiences.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            if let scopes = environment[prefix + "SCOPES"] { provider.defaultScopes = scopes.split(separator: " ").map(String.init) }
            if let method = environment[prefix + "AUTH_METHOD"] {
                guard let parsed = OIDCProviderConfiguration.ClientAuthentication(rawValue: method) else {
                    throw ValidationError("\(prefix)AUTH_METHOD must be client_secret_basic or client_secret_post")
                }
                provider.clientAuthentication = parsed
            }
            if let hosts = environment[prefix + "PICTURE_HOSTS"] {
                provider.pictureURLPrefixes = try pictureHosts(hosts, prefix + "PICTURE_HOSTS")
            }
            if let nonce = environment[prefix + "NONCE"] {
                guard let parsed = OIDCProviderConfiguration.NonceComparison(rawValue: nonce) else {
                    throw ValidationError("\(prefix)NONCE must be sha256 or raw")
                }
                provider.nonceComparison = parsed
            }
            providers.append(provider)
        }
        return providers
    }

    /// Comma-separated hosts (`cdn.example.com`, meaning `https://cdn.example.com/`) or URL
    /// prefixes (`https://cdn.example.com/avatars/`) from which `picture` may be fetched.
    static func pictureHosts(_ value: String, _ name: String) throws -> [String] {
        try value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.map { entry in
            let prefix = entry.contains("://") ? entry : "https://\(entry)/"
            guard URLAllowList.isValidEntry(prefix) else { throw ValidationError("\(name): \(entry) is not a host or an http(s) URL prefix") }
            return prefix
        }
    }
}
