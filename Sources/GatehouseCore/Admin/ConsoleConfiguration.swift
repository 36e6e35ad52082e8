import Foundation

/// The operators' console at `/admin/` (off unless configured): who may use it. An operator
/// is an account named by uid or by a verified email in `operators`, or one whose custom
/// claims carry `operatorClaim` set to `true`.
public struct ConsoleConfiguration: Sendable, Equatable {
    /// Uids and email addresses of the operators (`GATEHOUSE_ADMINS`).
    public var operators: [String]
    /// A custom claim that makes its account an operator when `true` (`GATEHOUSE_ADMIN_CLAIM`).
    public var operatorClaim: String?

    /// A console for these operators.
    public init(operators: [String], operatorClaim: String? = nil) {
        self.operators = operators
        self.operatorClaim = operatorClaim
    }

    /// Why the configuration cannot work (nobody could use the console), or `nil`.
    public func problem() -> String? {
        if operators.isEmpty && (operatorClaim ?? "").isEmpty {
            return "GATEHOUSE_ADMIN_CONSOLE is on but names no operator: set GATEHOUSE_ADMINS (uids or emails) or GATEHOUSE_ADMIN_CLAIM"
        }
        return nil
    }

    /// Whether the account is an operator. An email counts only where a linked provider
    /// vouches for it (`emailVerified`): anybody can type an address into a profile.
    public func admits(_ profile: UnifiedProfile) -> Bool {
        if operators.contains(profile.uid) { return true }
        let emails = Set(operators.filter { $0.contains("@") }.compactMap(EmailAddress.normalized))
        if !emails.isEmpty,
            profile.providers.contains(where: { $0.emailVerified && $0.email.flatMap(EmailAddress.normalized).map(emails.contains) == true })
        {
            return true
        }
        if let claim = operatorClaim, !claim.isEmpty, profile.customClaims[claim] == .bool(true) { return true }
        return false
    }
}
