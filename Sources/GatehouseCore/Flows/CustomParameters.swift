/// The query parameters of `start` that are forwarded to the provider.
public enum CustomParameters {
    /// Parameters the gateway itself sets on every authorize request (design §2), and the
    /// request objects (`request`, `request_uri`: OpenID Connect Core §6, RFC 9101) whose
    /// members a provider that accepts them takes over the request's own parameters.
    public static let reserved: Set<String> = [
        "client_id", "redirect_uri", "response_type", "response_mode", "scope", "state", "nonce",
        "code_challenge", "code_challenge_method", "request", "request_uri",
    ]

    /// Parameters that belong to the gateway's own `start` route.
    public static let gatewayParameters: Set<String> = ["return_to", "mode", "scope", "result_challenge"]

    /// The parameters to forward: everything but the gateway's own; a reserved name throws
    /// `invalid-custom-parameter` (the caller meant to override something it may not).
    public static func forwardable(from query: [(String, String)]) throws -> [(String, String)] {
        var forwarded: [(String, String)] = []
        for (name, value) in query {
            if gatewayParameters.contains(name) { continue }
            if reserved.contains(name.lowercased()) {
                throw GatehouseError.invalidCustomParameter(name)
            }
            guard name.utf8.count <= 64, value.utf8.count <= 1024, !name.isEmpty else {
                throw GatehouseError.invalidArgument("Custom parameters are limited to names of 64 bytes and values of 1024 bytes.")
            }
            forwarded.append((name, value))
        }
        return forwarded
    }
}
