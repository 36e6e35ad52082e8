import Foundation

/// A hook's answer: `{"decision":"allow"}` with optional `customClaims` and `sessionClaims`
/// objects, read strictly (any other member, kind or value is a malformed answer: a hook
/// failure, not a decision), or `{"decision":"deny","message":"…"}`, read leniently — an
/// object that says deny in any case, with white space around it or not, and with any HTTP
/// status, is a denial (with a default message when it has no usable one), so a receiver
/// meaning to refuse never lets a sign-in through under `GATEHOUSE_HOOK_ON_FAILURE=allow`.
enum HookAnswer: Equatable {
    /// Go on, with what the answer adds.
    case allow(HookAllowance)
    /// Refuse, with the message for the user (cleaned).
    case deny(message: String)

    /// The longest message shown.
    static let maximumMessageLength = 256
    /// The longest message kept, in bytes of UTF-8.
    static let maximumMessageBytes = 1_024

    /// Parses `body`; throws `HookFailure.invalidAnswer` naming what is wrong. `accountClaims`
    /// are the claims the request carried: `customClaims` may echo them as they are (see
    /// `CustomClaims.init(_:source:unchangedFrom:)`).
    init(body: [UInt8], accountClaims: [String: JSONValue] = [:]) throws {
        guard let value = try? JSONValue.parse(Data(body)), case .object(let object) = value else {
            throw HookFailure.invalidAnswer("the body is not a JSON object")
        }
        guard case .string(let decision)? = object["decision"] else {
            throw HookFailure.invalidAnswer("decision is missing or not a string")
        }
        if decision.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() == "deny" {
            var message = ""
            if case .string(let text)? = object["message"] { message = Self.clean(text) }
            self = .deny(message: message.isEmpty ? "The sign-in was refused." : message)
            return
        }
        switch decision {
        case "allow":
            if let extra = object.keys.sorted().first(where: { !["decision", "customClaims", "sessionClaims"].contains($0) }) {
                throw HookFailure.invalidAnswer("an allow answer has the unknown member \(extra.truncated(toBytes: 64).debugDescription)")
            }
            self = .allow(
                HookAllowance(
                    customClaims: try Self.claims(object["customClaims"], name: "customClaims", unchangedFrom: accountClaims),
                    sessionClaims: try Self.claims(object["sessionClaims"], name: "sessionClaims")))
        default:
            throw HookFailure.invalidAnswer("decision must be allow or deny")
        }
    }

    /// A claims member: absent, or an object of valid claims.
    private static func claims(_ value: JSONValue?, name: String, unchangedFrom stored: [String: JSONValue] = [:]) throws -> CustomClaims? {
        switch value {
        case nil: return nil
        case .object(let members)?:
            do {
                return try CustomClaims(members, source: name, unchangedFrom: stored)
            } catch let error as GatehouseError {
                throw HookFailure.invalidAnswer(error.detail)
            }
        default: throw HookFailure.invalidAnswer("\(name) must be an object")
        }
    }

    /// Plain text for a page (`displayable(characters:bytes:)`): at most 256 characters and
    /// 1 KB of UTF-8.
    static func clean(_ message: String) -> String {
        message.displayable(characters: maximumMessageLength, bytes: maximumMessageBytes)
    }
}

/// Why a hook could not be asked: the metric's outcome and the log's reason.
enum HookFailure: Error, Equatable {
    /// No answer within `GATEHOUSE_HOOK_TIMEOUT`.
    case timeout
    /// No connection (refused, DNS, TLS).
    case unreachable(String)
    /// A status other than 2xx.
    case status(Int)
    /// More than 16 KB.
    case tooLarge
    /// A body that is not an answer.
    case invalidAnswer(String)
    /// Not called: the hook's circuit breaker is open after failures in a row, for this many
    /// seconds more.
    case circuitOpen(retryAfter: Int)
    /// Not called: the gateway had as many outbound calls in flight and waiting as it allows.
    case overloaded

    /// Whether the failure says the receiver is down or overloaded (no connection, no answer
    /// in time, `502`, `503` or `504`: a proxy without its backend, or the receiver saying it
    /// cannot serve), which is what the hook's breaker counts. A receiver that answers anything
    /// else is up, a `500` included: that is the receiver failing on this call, often on the
    /// signing-in user's own data, and calling it again costs no wait. Counted, it would let
    /// anyone with two accounts whose data the receiver errs on open the breaker for everyone.
    var receiverDown: Bool {
        switch self {
        case .timeout, .unreachable: true
        case .status(let status): [502, 503, 504].contains(status)
        case .tooLarge, .invalidAnswer, .circuitOpen, .overloaded: false
        }
    }

    /// Whether the failure refuses the sign-in under `GATEHOUSE_HOOK_ON_FAILURE=allow` too.
    /// `allow` keeps sign-ins going while a receiver is down or erring; it must not let them on
    /// when the gateway itself is overloaded (whoever can fill its calls out would skip the
    /// hook), nor when the receiver refuses the call (`401`, `403`): that is a receiver up and
    /// turning the gateway away, most often a secret rotated on one side only, and letting
    /// everyone through unasked would switch the hook off without anyone deciding to.
    var refusesUnderAllow: Bool {
        switch self {
        case .overloaded: true
        case .status(let status): status == 401 || status == 403
        case .timeout, .unreachable, .tooLarge, .invalidAnswer, .circuitOpen: false
        }
    }

    /// The metric's outcome label (a fixed word).
    var outcome: String {
        switch self {
        case .timeout: "timeout"
        case .unreachable: "unreachable"
        case .status: "bad-status"
        case .tooLarge: "too-large"
        case .invalidAnswer: "invalid-answer"
        case .circuitOpen: "circuit-open"
        case .overloaded: "overloaded"
        }
    }

    /// For the log line.
    var reason: String {
        switch self {
        case .timeout: "no answer within the timeout"
        case .unreachable(let why): "cannot connect: \(why)"
        case .status(let status) where status == 401 || status == 403:
            "answered status \(status): the receiver refused the call (does it verify with GATEHOUSE_HOOK_SECRETS?)"
        case .status(let status): "answered status \(status)"
        case .tooLarge: "the answer is larger than 16 KB"
        case .invalidAnswer(let why): "malformed answer: \(why)"
        case .circuitOpen: "not called: it failed repeatedly, and is retried after the breaker's open time"
        case .overloaded: "not called: the gateway had too many outbound calls in flight"
        }
    }
}
