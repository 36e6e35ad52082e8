/// What a sign-in flow does (Firebase's operation types), parsed once where a request names it.
public enum SignInMode: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// Sign in, or create the account (`signin`, the default).
    case signIn = "signin"
    /// Add the identity to the signed-in account (needs a recent login).
    case link
    /// Prove again that the signed-in user controls an identity already linked.
    case reauthenticate

    /// The mode a request names; `signin` when it names none, `invalid-argument` for
    /// anything else.
    public init(parameter: String?) throws {
        guard let parameter else {
            self = .signIn
            return
        }
        guard let mode = SignInMode(rawValue: parameter) else {
            throw GatehouseError.invalidArgument("mode must be signin, link or reauthenticate.")
        }
        self = mode
    }

    /// The wire value, as logs show it.
    public var description: String { rawValue }

    /// Firebase's `operationType` of the result.
    var operationType: String {
        self == .signIn ? "signIn" : rawValue
    }
}
