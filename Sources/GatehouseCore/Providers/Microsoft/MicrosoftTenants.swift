/// The tenant values of the Microsoft identity platform (providers.md §1.1).
public enum MicrosoftTenants {
    /// The tenant of every personal Microsoft account.
    public static let consumers = "9188040d-6c67-4c5b-b112-36a304b66dad"

    /// Whether `text` is a lower- or upper-case GUID (ASCII hex digits only).
    public static func isGUID(_ text: String) -> Bool {
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        return groups.map(\.count) == [8, 4, 4, 4, 12] && groups.allSatisfy { $0.allSatisfy { $0.isASCII && $0.isHexDigit } }
    }

    /// The endpoint names that stand for an audience rather than one tenant.
    public static let audiences: Set<String> = ["common", "organizations", "consumers"]

    /// The tenant an issuer of the form `{login}/<tenant>/v2.0` names, or `nil` for another form.
    static func tenant(inIssuer issuer: String, login: String) -> String? {
        guard issuer.hasPrefix("\(login)/"), issuer.hasSuffix("/v2.0"), issuer.count > login.count + 6 else { return nil }
        return String(issuer.dropFirst(login.count + 1).dropLast(5))
    }

    /// Whether `value` may name a tenant: `common`, `organizations`, `consumers`, a GUID or a domain.
    public static func isValid(_ value: String) -> Bool {
        if audiences.contains(value) || isGUID(value) { return true }
        return value.count <= 253 && value.contains(".") && !value.hasPrefix(".") && !value.hasSuffix(".")
            && value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
    }

    /// Whether `value` names a tenant by one of its domains (neither an audience nor a GUID).
    public static func isDomain(_ value: String) -> Bool {
        isValid(value.lowercased()) && !audiences.contains(value.lowercased()) && !isGUID(value)
    }

    /// Whether `tenant=` may name `requested` under the configured audience `configured`
    /// (`common`, `organizations` or `consumers`): an endpoint that admits no account the
    /// configured one refuses. `organizations` takes work tenants (by name, GUID or domain),
    /// never `common`, `consumers` or the personal accounts' GUID; `consumers` takes only itself.
    public static func audience(_ configured: String, admitsEndpoint requested: String) -> Bool {
        let requested = requested.lowercased()
        switch configured.lowercased() {
        case "organizations": return !["common", "consumers", consumers].contains(requested)
        case "consumers": return ["consumers", consumers].contains(requested)
        default: return true
        }
    }

    /// Whether a token of tenant `tid` can come from the endpoint of `endpoint`: any tenant for
    /// `common`, work tenants for `organizations`, the personal tenant for `consumers`, that
    /// GUID for a GUID. A domain cannot be checked offline: `IDTokenValidator` compares `tid`
    /// with the GUID the domain's discovery document names.
    public static func endpoint(_ endpoint: String, admits tid: String) -> Bool {
        switch endpoint.lowercased() {
        case "common": return true
        case "organizations": return tid != consumers
        case "consumers", consumers: return tid == consumers
        case let guid where isGUID(guid): return tid == guid
        default: return tid != consumers
        }
    }
}
