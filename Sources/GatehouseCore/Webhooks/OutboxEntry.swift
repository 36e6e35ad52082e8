import Foundation

/// One event for one endpoint, as the store keeps it until it is delivered: the exact body
/// that is signed and sent (so every attempt sends the same bytes).
public struct OutboxEntry: Sendable, Equatable {
    /// `<event id>.<endpoint>` (neither holds a dot).
    public var id: String
    /// The event's id (the `webhook-id` header).
    public var eventId: String
    /// The endpoint's name.
    public var endpoint: String
    /// The event's type.
    public var type: String
    /// The JSON body.
    public var payload: Data
    /// When the event was written (its change committed).
    public var createdAt: Date
    /// When it is due next.
    public var nextAttemptAt: Date
    /// Attempts made so far.
    public var attempts: Int
    /// `pending` or `failed`.
    public var status: Status
    /// The last attempt's HTTP status, if it got one.
    public var lastStatus: Int?
    /// Why the last attempt failed (no secret, no URL).
    public var lastError: String?

    /// Where an entry stands.
    public enum Status: String, Sendable, CaseIterable {
        /// Waiting for its next attempt.
        case pending
        /// Given up (every attempt failed, or the endpoint answered `410 Gone`).
        case failed
    }

    /// A new entry, due at once.
    public init(
        eventId: String, endpoint: String, type: String, payload: Data, createdAt: Date, nextAttemptAt: Date? = nil, attempts: Int = 0,
        status: Status = .pending, lastStatus: Int? = nil, lastError: String? = nil
    ) {
        self.id = "\(eventId).\(endpoint)"
        self.eventId = eventId
        self.endpoint = endpoint
        self.type = type
        self.payload = payload
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt ?? createdAt
        self.attempts = attempts
        self.status = status
        self.lastStatus = lastStatus
        self.lastError = lastError
    }
}

/// What became of an attempt.
public enum DeliveryOutcome: Sendable, Equatable {
    /// A 2xx: the entry is removed.
    case delivered
    /// Try again at this time.
    case retry(at: Date, status: Int?, error: String)
    /// Give up.
    case failed(status: Int?, error: String)
    /// Not counted as an attempt: nothing was sent (no free slot for the call, a paused
    /// endpoint, a type not taken, a claim written too late in its lease), or the answer's
    /// wait was cut short by a late claim. Try again at this time (the retention still bounds
    /// how long an entry waits).
    case postponed(until: Date, error: String)
}

/// The entries a write records with it: set by `EventRecorder` around one store write, read
/// by the stores' write helpers, which insert them in that write's own transaction — so a
/// committed change always has its events and a rolled-back one never does.
public enum Outbox {
    /// The entries of the write in progress.
    @TaskLocal public static var entries: [OutboxEntry] = []
}

/// A write's result that may say it changed nothing (`false`, `nil`, an unlink refused): then
/// the stores record none of its events.
public protocol OutboxOutcome {
    /// Whether the write changed something.
    var changedSomething: Bool { get }
}

extension Bool: OutboxOutcome {
    /// `true`.
    public var changedSomething: Bool { self }
}

extension Optional: OutboxOutcome {
    /// Not `nil`.
    public var changedSomething: Bool { self != nil }
}

extension FlagChange: OutboxOutcome {
    /// Changed.
    public var changedSomething: Bool { self == .changed }
}

extension UnlinkOutcome: OutboxOutcome {
    /// Deleted.
    public var changedSomething: Bool {
        if case .deleted = self { return true }
        return false
    }
}

extension Outbox {
    /// `recorded`, or none when the write's `result` says it changed nothing.
    public static func keep(_ recorded: [OutboxEntry], after result: Any) -> [OutboxEntry] {
        guard !recorded.isEmpty else { return [] }
        if let outcome = result as? any OutboxOutcome, !outcome.changedSomething { return [] }
        return recorded
    }
}
