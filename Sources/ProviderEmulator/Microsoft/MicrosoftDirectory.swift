import Crypto
import Foundation

/// A directory tenant of the emulated Microsoft identity platform.
public struct MicrosoftTenant: Sendable {
    /// The tenant GUID (`tid`).
    public var id: String
    /// Its verified domain, usable in place of the GUID in URLs.
    public var domain: String
}

/// An account of the emulated Microsoft identity platform and Graph.
public struct MicrosoftSeedUser: Sendable {
    /// The `login_hint` that auto-approves this user (its sign-in name).
    public var hint: String
    /// The object id (`oid`); personal accounts: `00000000-0000-0000-` + the CID.
    public var oid: String
    /// The `tid`.
    public var tenantId: String
    /// The 16-hex CID of a personal account (Graph `/me` `id`); `nil` for work accounts.
    public var cid: String?
    /// Graph `displayName` and the `name` claim.
    public var displayName: String
    /// Graph `givenName`.
    public var givenName: String
    /// Graph `surname`.
    public var surname: String
    /// `userPrincipalName`.
    public var userPrincipalName: String
    /// Graph `mail` (`null` for personal accounts).
    public var mail: String?
    /// The ID token's `email` claim.
    public var emailClaim: String?
    /// Whether the ID token carries `xms_edov: true` (the domain owner verified the email).
    public var emailDomainVerified: Bool
    /// Graph `jobTitle`.
    public var jobTitle: String?
    /// Graph `preferredLanguage`.
    public var preferredLanguage: String?
    /// The side of the uploaded square photo, or `nil` when there is none.
    public var photoSize: Int?
    /// Traits listed at `/_emulator/users`.
    public var traits: [String]

    /// Whether this is a personal Microsoft account.
    public var isPersonal: Bool { cid != nil }
}

/// Tenants and users of the emulated Microsoft (providers.md §1–§2).
public enum MicrosoftDirectory {
    /// Personal accounts live in this tenant.
    public static let consumersTenant = "9188040d-6c67-4c5b-b112-36a304b66dad"
    /// Tenant A (Contoso).
    public static let tenantA = MicrosoftTenant(id: "8eaef023-2b34-4da1-9baa-8bc8c9d6a490", domain: "contoso.example")
    /// Tenant B (Fabrikam).
    public static let tenantB = MicrosoftTenant(id: "72f988bf-86f1-41af-91ab-2d7cd011db47", domain: "fabrikam.example")
    /// The photo sizes Graph serves (HD photos on Microsoft 365).
    public static let photoSizes = [48, 64, 96, 120, 240, 360, 432, 504, 648]

    /// The seeded accounts.
    public static let users: [MicrosoftSeedUser] = [
        MicrosoftSeedUser(
            hint: "AdeleV@contoso.example", oid: "87d349ed-44d7-43e1-9a83-5f2406dee5bd", tenantId: tenantA.id, cid: nil,
            displayName: "Adele Vance", givenName: "Adele", surname: "Vance", userPrincipalName: "AdeleV@contoso.example",
            mail: "AdeleV@contoso.example", emailClaim: "AdeleV@contoso.example", emailDomainVerified: true, jobTitle: "Retail Manager",
            preferredLanguage: "en-US", photoSize: 504, traits: ["work", "photo", "verified-email"]),
        MicrosoftSeedUser(
            hint: "BobK@fabrikam.example", oid: "5b7fd0d4-8c1e-4c4a-9f8e-2a1b3c4d5e6f", tenantId: tenantB.id, cid: nil,
            displayName: "Bob Kelly", givenName: "Bob", surname: "Kelly", userPrincipalName: "BobK@fabrikam.example",
            mail: "BobK@fabrikam.example", emailClaim: "BobK@fabrikam.example", emailDomainVerified: true, jobTitle: "Engineer",
            preferredLanguage: "de-DE", photoSize: nil, traits: ["work", "no-photo", "verified-email"]),
        MicrosoftSeedUser(
            hint: "steven@outlook.example", oid: "00000000-0000-0000-fde9-26f844473904", tenantId: consumersTenant, cid: "fde926f844473904",
            displayName: "Steven Lu", givenName: "Steven", surname: "Lu", userPrincipalName: "steven@outlook.example", mail: nil,
            emailClaim: "steven@outlook.example", emailDomainVerified: false, jobTitle: nil, preferredLanguage: nil, photoSize: nil,
            traits: ["personal", "no-photo"]),
        MicrosoftSeedUser(
            hint: "mallory@contoso.example", oid: "c0ffee00-1234-4abc-9def-0123456789ab", tenantId: tenantA.id, cid: nil,
            displayName: "Mallory Spoof", givenName: "Mallory", surname: "Spoof", userPrincipalName: "mallory@contoso.example",
            mail: "victim@victim.example", emailClaim: "victim@victim.example", emailDomainVerified: false, jobTitle: nil,
            preferredLanguage: "en-GB", photoSize: nil, traits: ["work", "unverified-email", "no-photo"]),
    ]

    /// How a `{tenant}` path segment restricts sign-ins.
    enum Audience: Equatable {
        case common, organizations, consumers
        case tenant(String)
    }

    /// Resolves a `{tenant}` segment, or `nil` when no such tenant exists (AADSTS90002).
    static func audience(_ segment: String) -> Audience? {
        switch segment.lowercased() {
        case "common": return .common
        case "organizations": return .organizations
        case "consumers", consumersTenant: return .consumers
        default:
            let tenant = [tenantA, tenantB].first { $0.id == segment.lowercased() || $0.domain == segment.lowercased() }
            return tenant.map { .tenant($0.id) }
        }
    }

    /// Whether `user` may sign in through an endpoint of `audience` (tenant restriction).
    static func admits(_ audience: Audience, _ user: MicrosoftSeedUser) -> Bool {
        switch audience {
        case .common: return true
        case .organizations: return !user.isPersonal
        case .consumers: return user.isPersonal
        case .tenant(let id): return user.tenantId == id
        }
    }

    /// The discovery `issuer` of an endpoint: the literal template for `common`/`organizations`.
    static func issuer(_ audience: Audience, base: String) -> String {
        switch audience {
        case .common, .organizations: return "\(base)/microsoft/{tenantid}/v2.0"
        case .consumers: return "\(base)/microsoft/\(consumersTenant)/v2.0"
        case .tenant(let id): return "\(base)/microsoft/\(id)/v2.0"
        }
    }

    /// The pairwise `sub`: different for every app.
    static func subject(_ user: MicrosoftSeedUser, clientID: String) -> String {
        let digest = SHA256.hash(data: Data("\(user.oid)|\(clientID)".utf8))
        return String(
            Data(digest).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").prefix(43))
    }
}
