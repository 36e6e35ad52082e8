import Foundation
import Synchronization

/// Sessions found ended while an ID token of theirs was checked, each kept until the presented
/// token expires. An ended session never comes back (a new sign-in is a new session), so a
/// token of one is refused again without reading the store: a signed-out user's genuine token,
/// presented over and over until it expires, would otherwise cost a read each time, and only a
/// token's signature and times are checked before that read. Per instance; at most `capacity`
/// sessions, past which one is not kept (its tokens are read as before).
final class EndedSessions: Sendable {
    private struct State {
        var ended: [String: Date] = [:]
        /// The earliest time a kept session may be dropped: until then, a full memory has
        /// nothing to drop and is not scanned.
        var nextExpiry = Date.distantFuture
        /// The passes over every kept session so far (for tests).
        var scans = 0
    }

    private let state = Mutex(State())
    /// The most sessions kept.
    let capacity: Int

    /// A memory of at most `capacity` ended sessions.
    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// Whether the session with this family id was found ended and tokens of it may still be live.
    func contains(_ familyId: String, now: Date) -> Bool {
        state.withLock { ($0.ended[familyId] ?? .distantPast) > now }
    }

    /// Keeps the session with this family id as ended until `until` (the presented token's expiry).
    func insert(_ familyId: String, until: Date, now: Date) {
        state.withLock { state in
            if state.ended.count >= capacity, state.ended[familyId] == nil {
                // Scanned only once something kept has expired, so a full memory costs a look
                // at one date per insert, not a pass over every session.
                guard now >= state.nextExpiry else { return }
                state.ended = state.ended.filter { $0.value > now }
                state.scans += 1
                state.nextExpiry = state.ended.values.min() ?? .distantFuture
                guard state.ended.count < capacity else { return }
            }
            let kept = max(until, state.ended[familyId] ?? .distantPast)
            state.ended[familyId] = kept
            state.nextExpiry = min(state.nextExpiry, kept)
        }
    }

    /// The sessions kept (for tests).
    var count: Int { state.withLock { $0.ended.count } }
    /// The passes over every kept session so far (for tests).
    var scans: Int { state.withLock { $0.scans } }
}
