/// A GitHub account of the emulator, with the data `/user` and `/user/emails` answer.
public struct GitHubSeedUser: Sendable {
    /// The numeric user id (`id`).
    public var id: Int
    /// The `login`, also the value of the authorize endpoint's `login` hint.
    public var login: String
    /// The display name, or `nil`.
    public var name: String?
    /// The public profile email, `nil` when the user keeps it private.
    public var publicEmail: String?
    /// The entries of `/user/emails`.
    public var emails: [(email: String, verified: Bool, primary: Bool, visibility: String?)]
    /// The traits the seed list advertises for tests (`public-email`, `private-email`, …).
    public var traits: [String]
    /// The colour of the generated avatar, as RGB.
    public var avatarColor: (UInt8, UInt8, UInt8)
}

/// The users every emulator starts with, listed at `GET /_emulator/users`.
public enum SeededUsers {
    /// The emulated GitHub's accounts.
    public static let github: [GitHubSeedUser] = [
        GitHubSeedUser(
            id: 583231, login: "octocat", name: "The Octocat", publicEmail: "octocat@github.com",
            emails: [("octocat@github.com", true, true, "public")],
            traits: ["public-email", "verified-email", "photo"], avatarColor: (36, 41, 47)),
        GitHubSeedUser(
            id: 1_000_002, login: "private-pat", name: "Pat Private", publicEmail: nil,
            emails: [("pat.private@example.com", true, true, "private"), ("pat.old@example.net", false, false, nil)],
            traits: ["private-email", "verified-email", "photo"], avatarColor: (46, 160, 67)),
        GitHubSeedUser(
            id: 1_000_003, login: "unverified-uma", name: nil, publicEmail: nil,
            emails: [("uma@example.org", false, true, "private"), ("uma.second@example.org", false, false, nil)],
            traits: ["unverified-emails-only", "photo"], avatarColor: (207, 34, 46)),
        // One person at two providers with the same verified address (the OpenID emulator
        // spells it with capitals), and at Yahoo with it unverified: "one account per email".
        GitHubSeedUser(
            id: 1_000_004, login: "sam-shared", name: "Sam Shared", publicEmail: nil,
            emails: [("sam.shared@example.com", true, true, "private")],
            traits: ["shared-email", "private-email", "verified-email", "photo"], avatarColor: (130, 80, 223)),
        // The sample app's before-create hook turns away new accounts at blocked.example.
        GitHubSeedUser(
            id: 1_000_005, login: "blocked-bo", name: "Bo Blocked", publicEmail: "bo@blocked.example",
            emails: [("bo@blocked.example", true, true, "public")],
            traits: ["blocked-domain", "public-email", "verified-email", "photo"], avatarColor: (191, 135, 0)),
        // A display name made of markup: every page that shows it must show it as text.
        GitHubSeedUser(
            id: 1_000_006, login: "markup-mallory", name: "<script>alert('mallory')</script><b>Mallory</b>", publicEmail: nil,
            emails: [("mallory@example.com", true, true, "private")], traits: ["markup-name", "private-email", "verified-email", "photo"],
            avatarColor: (9, 105, 218)),
    ]

    /// The JSON array of `/_emulator/users`: provider, hint, traits and email per user.
    static func listing() -> [[String: Any]] {
        let microsoft: [[String: Any]] = MicrosoftDirectory.users.map { user in
            [
                "provider": "microsoft.com", "hint": user.hint, "tenant": user.tenantId, "traits": user.traits,
                "email": (user.mail ?? user.userPrincipalName), "name": user.displayName,
            ]
        }
        let openID: [[String: Any]] = oidc.map { user in
            [
                "provider": user.issuer == "yahoo" ? "yahoo.com" : "oidc.emulator", "hint": user.hint, "traits": user.traits, "email": user.email,
                "name": user.name,
            ]
        }
        return github.map { user in
            let primaryVerified = user.emails.first { $0.primary && $0.verified }?.email
            return [
                "provider": "github.com",
                "hint": user.login,
                "traits": user.traits,
                "email": (user.publicEmail ?? primaryVerified ?? user.emails.first?.email) as Any? ?? NSNullValue.null,
                "name": (user.name as Any?) ?? NSNullValue.null,
            ]
        } + microsoft + openID
    }
}
