import CurlClient
import Foundation
import Logging
import StandardWebhooks
import Synchronization

/// The blocking hooks over the one libcurl client: each call a signed (Standard Webhooks)
/// JSON `POST` to the operator's URL, with the hook timeout and a 16 KB answer cap. A URL is
/// the operator's own, so loopback and private addresses are allowed (unlike photo hosts).
public final class HookClient: SignInHooks {
    let configuration: HookConfiguration
    let http: CurlHTTPClient
    let signer: WebhookSigner
    let clock: any GatehouseClock
    let metrics: GatehouseMetrics
    let logger: Logger
    /// When each hook's failure was last logged at warning level (at most once a minute), by
    /// hook, and apart for the gateway's overload (`hook|overloaded`).
    private let lastWarned = Mutex<[String: ContinuousClock.Instant]>([:])
    /// One breaker per hook: a receiver that is down is not waited for on every sign-in
    /// (each would hold its caller for the whole timeout); while open, sign-ins meet the
    /// failure policy at once, and after the open time one call probes the receiver. The
    /// failures that open it must come from two identities at least: what a receiver fails on
    /// may be the signing-in user's own data, and one user's failures alone must not refuse
    /// everyone else's sign-ins (or, under `allow`, let them through unasked).
    private let breakers: [HookEvent: CircuitBreaker]
    /// The custom claim that makes an account a console operator (console on or off): an
    /// answer may not change its value (see `checked(_:for:)`).
    let operatorClaim: String?

    /// The largest answer read.
    static let maximumAnswerBytes = 16 << 10

    /// Hooks per `configuration` (checked by `HookConfiguration.problem()` before); each hook's
    /// breaker opens after `breaker.failureThreshold` failures in a row for `breaker.openDuration`.
    public init(
        configuration: HookConfiguration, http: CurlHTTPClient, clock: any GatehouseClock = SystemClock(), metrics: GatehouseMetrics = .disabled,
        breaker: CircuitBreakerSettings = CircuitBreakerSettings(), operatorClaim: String? = nil, logger: Logger = Logger(label: "gatehouse")
    ) {
        self.operatorClaim = operatorClaim
        self.configuration = configuration
        self.http = http
        self.signer = WebhookSigner(secrets: configuration.secrets.compactMap(WebhookSecret.init))
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        breakers = Dictionary(
            uniqueKeysWithValues: configuration.urls.keys.map {
                ($0, CircuitBreaker(providerId: "hook:\($0.rawValue)", settings: breaker, metrics: metrics, distinctCallers: 2))
            })
    }

    /// Whether `event` has a URL.
    public func asks(_ event: HookEvent) -> Bool {
        configuration.urls[event] != nil
    }

    /// Calls the hook of `event`; see `SignInHooks.ask`.
    public func ask(_ event: HookEvent, _ data: HookRequest.Payload) async throws -> HookAllowance {
        guard let url = configuration.urls[event] else { return .nothing }
        let started = ContinuousClock.now
        let answer: HookAnswer
        do {
            answer = try await guarded(event, caller: "\(data.profile.providerId):\(data.profile.federatedId)") {
                try checked(
                    try await call(
                        url: url, request: HookRequest(type: event, id: "evt_" + SecureRandom.token(), timestamp: clock.now(), data: data)),
                    for: data.account)
            }
        } catch let failure as HookFailure {
            // Refused by the open breaker: no call was made, and the caller may retry once it
            // closes. Refused for overload: no call was made either; neither has a duration.
            var refusedFor: Int?
            if case .circuitOpen(let seconds) = failure { refusedFor = seconds }
            let called = refusedFor == nil && failure != .overloaded
            metrics.hookCall(event: event.rawValue, outcome: failure.outcome, duration: called ? ContinuousClock.now - started : nil)
            warn(event, failure)
            // The gateway's own overload, and a receiver refusing the call, refuse the sign-in
            // whatever the policy (`refusesUnderAllow`).
            if failure.refusesUnderAllow { throw GatehouseError.hookUnavailable(event.rawValue, retryAfter: 1) }
            switch configuration.onFailure {
            case .deny: throw GatehouseError.hookUnavailable(event.rawValue, retryAfter: refusedFor ?? 1)
            case .allow: return .nothing
            }
        }
        switch answer {
        case .allow(let allowance):
            metrics.hookCall(event: event.rawValue, outcome: "allow", duration: ContinuousClock.now - started)
            return allowance
        case .deny(let message):
            metrics.hookCall(event: event.rawValue, outcome: "deny", duration: ContinuousClock.now - started)
            throw GatehouseError.signInDenied(message: message)
        }
    }

    /// See `SignInHooks.unusable`. The receiver answered, so its breaker is not touched.
    public func unusable(_ event: HookEvent, reason: String) throws -> HookAllowance {
        let failure = HookFailure.invalidAnswer(reason)
        metrics.hookCall(event: event.rawValue, outcome: failure.outcome, duration: nil)
        warn(event, failure)
        switch configuration.onFailure {
        case .deny: throw GatehouseError.hookUnavailable(event.rawValue, retryAfter: 1)
        case .allow: return .nothing
        }
    }

    /// Runs `call` through the hook's breaker: `circuitOpen` at once while it is open; a
    /// failure that says the receiver is down counts toward opening it, as `caller`'s (the
    /// signing-in identity), and any answer closes it.
    private func guarded(_ event: HookEvent, caller: String, _ call: () async throws -> HookAnswer) async throws -> HookAnswer {
        guard let breaker = breakers[event] else { return try await call() }
        let probe: Bool
        do {
            probe = try await breaker.admit(now: clock.now(), caller: caller)
        } catch {
            throw HookFailure.circuitOpen(retryAfter: (error as? GatehouseError)?.retryAfter ?? 1)
        }
        do {
            let answer = try await call()
            await breaker.record(.answered, probe: probe, caller: caller, now: clock.now())
            return answer
        } catch let failure as HookFailure where !Task.isCancelled {
            // A call the gateway never made says nothing of the receiver either way.
            let outcome: CircuitBreaker.Outcome = failure == .overloaded ? .unknown : failure.receiverDown ? .failed : .answered
            await breaker.record(outcome, probe: probe, caller: caller, now: clock.now())
            throw failure
        } catch {
            await breaker.record(.unknown, probe: probe, now: clock.now())
            throw error
        }
    }

    /// `answer`, unless it cannot be used for `account`:
    /// - its `customClaims` set the operator claim, or a name read as it without case, to
    ///   another value: the app's hook labels users, but making one a console operator (who can
    ///   mint any service key), or unmaking one, is for operators and `admin` keys only. Claims
    ///   that leave such a name out keep its stored value (added to them), so a hook answering
    ///   fixed claims does not lock operators out;
    /// - its `sessionClaims` name the operator claim: where the account has none, or loses it
    ///   later (a demotion that removes it), the session's tokens would carry it, and whoever
    ///   trusts those tokens would take the session for an operator's;
    /// - the account's claims (as the answer leaves them) and its `sessionClaims` together pass
    ///   the size limit: tokens would carry only the account's, silently.
    private func checked(_ answer: HookAnswer, for account: HookRequest.Account) throws -> HookAnswer {
        guard case .allow(var allowance) = answer else { return answer }
        // Names a consumer comparing without case reads as the operator claim, stored or
        // answered, are held to the same rules as the claim itself: left out, each keeps its
        // stored value; changed, the answer is refused.
        if let operatorClaim, let claims = allowance.customClaims {
            let names = Set(
                [operatorClaim] + claims.readingAs(operatorClaim) + CustomClaims.names(account.customClaims.keys, readingAs: operatorClaim))
            var members = claims.members
            for name in names.sorted() where claims.members[name] != account.customClaims[name] {
                guard claims.members[name] == nil, let kept = account.customClaims[name] else {
                    let claim = "the console's operator claim \(operatorClaim.debugDescription) (GATEHOUSE_ADMIN_CLAIM)"
                    let what = name == operatorClaim ? claim : "\(name.debugDescription), a name read as \(claim) without case"
                    throw HookFailure.invalidAnswer("customClaims change \(what): only an operator or an admin key may change it")
                }
                members[name] = kept
            }
            if members != claims.members {
                do {
                    allowance.customClaims = try CustomClaims(members, source: "customClaims", unchangedFrom: account.customClaims)
                } catch let error as GatehouseError {
                    throw HookFailure.invalidAnswer(error.detail)
                }
            }
        }
        if let operatorClaim, let session = allowance.sessionClaims,
            session.members[operatorClaim] != nil || !session.readingAs(operatorClaim).isEmpty
        {
            throw HookFailure.invalidAnswer(
                "sessionClaims name the console's operator claim \(operatorClaim.debugDescription) (GATEHOUSE_ADMIN_CLAIM), which only an account's claims carry"
            )
        }
        if let session = allowance.sessionClaims {
            let size = HookAllowance.tokenClaimsSize(
                session: session.members, account: allowance.customClaims?.members ?? account.customClaims)
            guard size <= CustomClaims.maximumBytes else {
                throw HookFailure.invalidAnswer(
                    "the account's claims and sessionClaims together take \(size) bytes serialized; at most \(CustomClaims.maximumBytes)")
            }
        }
        return .allow(allowance)
    }

    /// One signed `POST`; every way it can fail is a `HookFailure`.
    private func call(url: String, request: HookRequest) async throws -> HookAnswer {
        let body = try JSONCoding.encoder().encode(request)
        var headers: OutboundHeaders = ["Content-Type": "application/json", "Accept": "application/json"]
        for (name, value) in signer.headers(id: request.id, timestamp: Int(request.timestamp.timeIntervalSince1970), body: body) {
            headers.add(name, value)
        }
        let timeout = Duration.milliseconds(Int(configuration.timeout * 1000))
        // `.high`: the sign-in or refresh it belongs to waits for the answer.
        var outbound = OutboundRequest(
            method: "POST", url: url, headers: headers, body: Array(body), timeout: timeout, connectTimeout: timeout,
            maxResponseBytes: Self.maximumAnswerBytes)
        outbound.priority = .high
        // A receiver that hangs holds at most its share of the slots: the providers' calls of
        // the sign-ins it does not hold still find one.
        outbound.share = "hooks"
        let response: OutboundResponse
        do {
            response = try await http.execute(outbound)
        } catch let error as OutboundError {
            switch error.kind {
            case .timedOut: throw HookFailure.timeout
            case .responseTooLarge: throw HookFailure.tooLarge
            case .overloaded, .ownerOverloaded: throw HookFailure.overloaded
            // The sign-in itself was cancelled (its client went away, the gateway stops): it
            // ends here. As a failure, the `allow` policy would let it on unasked. (A client
            // shut down under a live task is a failure like any other.)
            case .cancelled where Task.isCancelled: throw CancellationError()
            default: throw HookFailure.unreachable(error.message)
            }
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw HookFailure.unreachable("the call failed")
        }
        guard (200..<300).contains(response.status) else {
            // A receiver may answer its refusal with an error status: a deny answer is a denial
            // whatever the status, so that under `allow` a refusal never lets the sign-in
            // through. Anything else with such a
            // status is a failure, an allow answer included.
            if let answer = try? HookAnswer(body: response.body), case .deny = answer { return answer }
            throw HookFailure.status(response.status)
        }
        return try HookAnswer(body: response.body, accountClaims: request.data.account.customClaims)
    }

    /// Logs a failure: at warning level once a minute per hook, at debug level otherwise (a
    /// hook that is down must not flood the log with one line per sign-in).
    private func warn(_ event: HookEvent, _ failure: HookFailure) {
        let now = ContinuousClock.now
        // The gateway's overload is throttled apart: its lines must not hide the receiver's.
        let key = failure == .overloaded ? event.rawValue + "|overloaded" : event.rawValue
        let loud = lastWarned.withLock { last in
            if let previous = last[key], now - previous < .seconds(60) { return false }
            last[key] = now
            return true
        }
        let metadata: Logger.Metadata = [
            "hook.event": "\(event.rawValue)", "hook.outcome": "\(failure.outcome)", "hook.reason": "\(failure.reason)",
            // What became of the sign-in: some failures refuse it whatever the policy.
            "hook.on_failure": "\(failure.refusesUnderAllow ? HookFailurePolicy.deny.rawValue : configuration.onFailure.rawValue)",
        ]
        if loud { logger.warning("hook call failed", metadata: metadata) } else { logger.debug("hook call failed", metadata: metadata) }
    }
}
