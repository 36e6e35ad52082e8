import Foundation

/// The blocking hooks' settings (`GATEHOUSE_HOOK_*`).
public struct HookConfiguration: Sendable {
    /// Where each configured hook is posted; an event without a URL is not asked.
    public var urls: [HookEvent: String]
    /// The Standard Webhooks secrets (`whsec_…`) that sign each call; every one signs, so a
    /// rotation adds the new one, then removes the old one once the app knows both.
    public var secrets: [String]
    /// How long one hook call may take (seconds, at most 10).
    public var timeout: TimeInterval = 2
    /// What a failed call means.
    public var onFailure: HookFailurePolicy = .deny

    /// Hooks at `urls`, signed with `secrets`.
    public init(urls: [HookEvent: String], secrets: [String], timeout: TimeInterval = 2, onFailure: HookFailurePolicy = .deny) {
        self.urls = urls
        self.secrets = secrets
        self.timeout = timeout
        self.onFailure = onFailure
    }

    /// The longest a hook call may take.
    public static let maximumTimeout: TimeInterval = 10

    /// Why this configuration is unsafe or incomplete, or `nil`. A hook URL is https; plain
    /// http only to a loopback address (the operator's own receiver on the same host, or the
    /// demo's emulator), where nothing off the host can read or change the call.
    public func problem() -> String? {
        if urls.isEmpty { return nil }
        guard !secrets.isEmpty else { return "GATEHOUSE_HOOK_SECRETS must be set when a hook URL is" }
        for secret in secrets where !Self.isWebhookSecret(secret) {
            return "GATEHOUSE_HOOK_SECRETS entries are whsec_ followed by the base64 of 24 to 64 bytes"
        }
        guard timeout > 0, timeout <= Self.maximumTimeout else { return "GATEHOUSE_HOOK_TIMEOUT is at most 10 seconds" }
        for (event, url) in urls.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let name = "GATEHOUSE_HOOK_\(event == .beforeCreate ? "BEFORE_CREATE" : "BEFORE_SIGN_IN")_URL"
            guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty,
                components.user == nil, components.password == nil
            else { return "\(name) must be an absolute URL without credentials" }
            switch components.scheme?.lowercased() {
            case "https": continue
            case "http":
                guard Self.isLoopback(host) else { return "\(name) must be https (plain http only to a loopback address)" }
            default: return "\(name) must be an https URL"
            }
        }
        return nil
    }

    /// `whsec_` and 24 to 64 bytes of base64.
    static func isWebhookSecret(_ text: String) -> Bool {
        guard text.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(text.dropFirst(6))) else { return false }
        return (24...64).contains(bytes.count)
    }

    /// `localhost`, an IPv4 literal `127.x.x.x` or `::1` (a name such as `127.example.com`
    /// may resolve anywhere).
    static func isLoopback(_ host: String) -> Bool {
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        if bare == "localhost" || bare == "::1" { return true }
        let parts = bare.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
