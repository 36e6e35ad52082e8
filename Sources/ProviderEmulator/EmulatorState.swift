import Foundation

/// A fault to inject on one emulated endpoint (`POST /_emulator/faults`).
struct Fault: Sendable {
    /// `METHOD path`, as received (e.g. `GET /github-api/user`).
    var endpoint: String
    /// The status to answer with; `nil` only delays the real answer.
    var status: Int?
    /// Extra response headers.
    var headers: [String: String]
    /// The response body.
    var body: String
    /// When positive, the body is this many zero bytes instead (a large answer without a
    /// large control request).
    var bodyBytes = 0
    /// Latency added before answering.
    var delayMilliseconds: Int
    /// When positive, the answer waits this long or until `POST /_emulator/faults/release`,
    /// after `delayMilliseconds`: a test decides when a call it knows is in flight answers.
    var holdMilliseconds = 0
    /// How many more requests it applies to; `nil` until cleared.
    var remaining: Int?
    /// When positive, the real answer's head and the first half of its body are sent, and
    /// the rest waits this long or until `POST /_emulator/faults/release`.
    var pauseBodyMilliseconds = 0
    /// With `pauseBodyMilliseconds`: the answer is sent chunked, without its length (a
    /// provider streaming an answer of unknown size).
    var chunked = false
}

/// An authorization code waiting for its one redemption.
struct IssuedCode: Sendable {
    var clientID: String
    var redirectURI: String?
    var login: String
    var scopes: [String]
    var codeChallenge: String?
    var issuedAt: Date
}

/// An access token the emulated provider handed out.
struct IssuedToken: Sendable {
    var login: String
    var clientID: String
    var scopes: [String]
    var expired: Bool
    var revoked: Bool
    var used: Int
    var resetAt: Int
}

/// Everything the emulator remembers: codes, tokens, call counts and faults.
/// An actor, because the HTTP server answers requests concurrently.
actor EmulatorState {
    private var codes: [String: IssuedCode] = [:]
    private var tokens: [String: IssuedToken] = [:]
    /// GitHub App refresh tokens (`ghr_…`) and the access token each was issued with.
    private var refreshTokens: [String: (accessToken: String, record: IssuedToken)] = [:]
    private var stats: [String: Int] = [:]
    /// The `304 Not Modified` answers, by `METHOD path`.
    private var notModified: [String: Int] = [:]
    private var faults: [Fault] = []
    /// Bumped by `POST /_emulator/faults/release`: paused bodies watch it.
    private var releases = 0

    // MARK: Control path

    func count(_ endpoint: String) {
        stats[endpoint, default: 0] += 1
    }

    func statistics() -> [String: Int] { stats }

    /// Counts a `304 Not Modified` answer of `endpoint` (also counted as a call).
    func countNotModified(_ endpoint: String) {
        notModified[endpoint, default: 0] += 1
    }

    /// The `304`s answered, by `METHOD path`.
    func notModifiedStatistics() -> [String: Int] { notModified }

    func addFault(_ fault: Fault) { faults.append(fault) }

    func clearFaults() { faults.removeAll() }

    /// Lets every paused body and held answer go on.
    func releasePausedBodies() { releases += 1 }

    /// Waits `milliseconds` (counted in sleeps, so longer on a loaded machine), or less if
    /// paused bodies are released meanwhile or the request is cancelled (its caller went away,
    /// or the emulator is stopping).
    func pause(milliseconds: Int) async {
        let start = releases
        var waited = 0
        // Bounded polling: the pause ends by itself even if nobody releases it.
        while releases == start, waited < milliseconds, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(20))
            waited += 20
        }
    }

    /// The fault that applies to this request, consuming one of its `times`.
    func takeFault(for endpoint: String) -> Fault? {
        guard let index = faults.firstIndex(where: { $0.endpoint == endpoint && ($0.remaining ?? 1) > 0 }) else { return nil }
        let fault = faults[index]
        if let remaining = fault.remaining {
            faults[index].remaining = remaining - 1
        }
        return fault
    }

    /// Marks every access token issued so far as expired.
    func expireAllTokens() -> Int {
        for key in tokens.keys { tokens[key]?.expired = true }
        return tokens.count
    }

    // MARK: Codes and tokens

    func storeCode(_ code: String, _ issued: IssuedCode) { codes[code] = issued }

    /// Removes and returns the code: a code is redeemable once, whatever the outcome.
    func redeemCode(_ code: String) -> IssuedCode? { codes.removeValue(forKey: code) }

    func storeToken(_ token: String, _ issued: IssuedToken) { tokens[token] = issued }

    func token(_ token: String) -> IssuedToken? { tokens[token] }

    func storeRefreshToken(_ refreshToken: String, accessToken: String, _ issued: IssuedToken) {
        refreshTokens[refreshToken] = (accessToken, issued)
    }

    /// Spends a GitHub App refresh token of `clientID`: it and the access token issued with
    /// it stop working (providers.md §4.2), whatever the caller does next. `nil` when unknown,
    /// spent, revoked or another client's.
    func redeemRefreshToken(_ refreshToken: String, clientID: String) -> IssuedToken? {
        guard let grant = refreshTokens[refreshToken], grant.record.clientID == clientID, tokens[grant.accessToken]?.revoked != true
        else { return nil }
        refreshTokens[refreshToken] = nil
        tokens[grant.accessToken]?.revoked = true
        return grant.record
    }

    /// Counts one API call against the token's rate limit and returns the updated record.
    func useToken(_ token: String) -> IssuedToken? {
        guard var record = tokens[token] else { return nil }
        let now = Int(Date().timeIntervalSince1970)
        if record.resetAt <= now {
            record.used = 0
            record.resetAt = now + 3600
        }
        record.used += 1
        tokens[token] = record
        return record
    }

    /// Gives back a use of the token: GitHub does not count a `304 Not Modified` against the
    /// rate limit.
    func refundUse(_ token: String) {
        guard var record = tokens[token], record.used > 0 else { return }
        record.used -= 1
        tokens[token] = record
    }

    /// Revokes one token, or every token of the same user and client (`grant`).
    func revoke(_ token: String, wholeGrant: Bool) -> Bool {
        guard let record = tokens[token], !record.revoked else { return false }
        for (key, other) in tokens where key == token || (wholeGrant && other.login == record.login && other.clientID == record.clientID) {
            tokens[key]?.revoked = true
        }
        return true
    }

    /// All access tokens issued so far (for tests that search logs and databases for them).
    func issuedTokens() -> [String] { Array(tokens.keys) }
}
