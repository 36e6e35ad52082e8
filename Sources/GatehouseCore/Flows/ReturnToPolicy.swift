import Foundation

/// Decides whether a `return_to` URL is on the allow-list (see `URLAllowList` for the rules).
public struct ReturnToPolicy: Sendable {
    private let allowList: URLAllowList

    /// Creates the policy from allow-list entries (invalid entries are ignored;
    /// `GatewayConfiguration.validate` reports them).
    public init(allowList: [String]) {
        self.allowList = URLAllowList(allowList)
    }

    /// Throws `invalid-return-to` unless the URL is allowed.
    public func check(_ returnTo: String) throws {
        guard Self.parse(returnTo) != nil else {
            throw GatehouseError.invalidReturnTo("return_to must be an absolute http(s) URL without credentials or unusual characters.")
        }
        guard allowList.allows(returnTo) else {
            throw GatehouseError.invalidReturnTo("return_to is not on the gateway's allow-list.")
        }
    }

    /// The strict parse `URLAllowList` uses.
    static func parse(_ text: String) -> URLAllowList.ParsedURL? { URLAllowList.parse(text) }
}
