import Foundation

// What a printed or logged value shows: never a token, a verifier or a pending credential.
// `print(credentials)`, `"\(request)"` and a logged error are common in app code, and a log
// line outlives the session it would let someone take over.

extension Credentials: CustomStringConvertible, CustomDebugStringConvertible {
    /// The expiry only: the tokens are secrets.
    public var description: String { "Credentials(idToken: <redacted>, refreshToken: <redacted>, expiresAt: \(expiresAt))" }
    /// As `description`.
    public var debugDescription: String { description }
}

extension SignInRequest: CustomStringConvertible, CustomDebugStringConvertible {
    /// The URL without its query (a link's or re-authentication's start URL carries a one-time
    /// `start_token` that acts for the account) and the return address; the verifier, which
    /// alone redeems the result, is left out.
    public var description: String {
        var shown = URLComponents(url: url, resolvingAgainstBaseURL: false)
        if shown?.query != nil { shown?.query = "<redacted>" }
        return "SignInRequest(url: \(shown?.string ?? "<redacted>"), returnTo: \(returnTo), verifier: <redacted>)"
    }
    /// As `description`.
    public var debugDescription: String { description }
}

extension Problem: CustomStringConvertible, CustomDebugStringConvertible {
    /// The members that redeem something elsewhere, as `<redacted>` in `description`.
    static let secretExtensions: Set<String> = ["pendingToken"]

    /// Code, status and detail, with the extensions (a pending token redacted).
    public var description: String {
        let members = extensions.sorted { $0.key < $1.key }.map { "\($0.key): \(Self.secretExtensions.contains($0.key) ? "<redacted>" : $0.value)" }
        return "Problem(code: \(code.rawValue), status: \(status), detail: \(detail)\(members.isEmpty ? "" : ", \(members.joined(separator: ", "))"))"
    }
    /// As `description`.
    public var debugDescription: String { description }
}
