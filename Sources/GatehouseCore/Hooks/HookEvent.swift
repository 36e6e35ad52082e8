/// The blocking hooks an app can put into sign-in (`GATEHOUSE_HOOK_*_URL`).
public enum HookEvent: String, Sendable, CaseIterable, Codable {
    /// A sign-in or ID-token exchange would create a new account. Asked before anything is
    /// written; a denial leaves no account, link, token, profile or session.
    case beforeCreate = "before-create"
    /// Every sign-in, re-authentication and link of an account, a new one included (after
    /// `before-create` allowed it), after the provider answered and before any session, link,
    /// token or profile is written.
    case beforeSignIn = "before-sign-in"
}

/// What the app's hook does when it cannot be asked (`GATEHOUSE_HOOK_ON_FAILURE`).
public enum HookFailurePolicy: String, Sendable, CaseIterable {
    /// The sign-in fails with `503 hook-unavailable` (the default: the app's rules hold).
    case deny
    /// The sign-in goes on as if the hook had allowed it without claims.
    case allow
}
