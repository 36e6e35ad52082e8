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

    /// What makes an account an operator.
    public enum Admission: Sendable, Equatable {
        /// Its uid is listed.
        case uid
        /// Its custom claims carry the operator claim set to `true`.
        case claim
        /// A linked provider verifies a listed address (normalized): the account is an operator
        /// only while that address names no other account (`GatehouseStorage.uids(verifiedEmail:limit:)`
        /// answers it alone), which the caller checks.
        case email(String)
    }

    /// Why the account is an operator, or `nil` when it is not one. An email counts only where a
    /// linked provider vouches for it (`emailVerified`): anybody can type an address into a
    /// profile; and it names one account only while no other holds it verified, which accounts
    /// that shared it before one account per verified email was the rule may (the caller asks
    /// the store).
    public func admission(_ profile: UnifiedProfile) -> Admission? {
        if operators.contains(profile.uid) { return .uid }
        if let claim = operatorClaim, !claim.isEmpty, profile.customClaims[claim] == .bool(true) { return .claim }
        let emails = Set(operators.filter { $0.contains("@") }.compactMap(EmailAddress.normalized))
        guard !emails.isEmpty else { return nil }
        for provider in profile.providers where provider.emailVerified {
            if let address = provider.email.flatMap(EmailAddress.normalized), emails.contains(address) { return .email(address) }
        }
        return nil
    }
}
