import Foundation
import Synchronization

/// Sessions found ended while an ID token of theirs was checked, each kept until the last token
/// it could have signed expires. An ended session never comes back (a new sign-in is a new
/// session), so a token of one is refused again without reading the store: a signed-out user's
/// genuine token, presented over and over until it expires, would otherwise cost a read each
/// time, and only a token's signature and times are checked before that read. Per instance;
/// at most `capacity` sessions, past which one is not kept (its tokens are read as before).
final class EndedSessions: Sendable {
    private let ended = Mutex<[String: Date]>([:])
    /// The most sessions kept.
    let capacity: Int

    /// A memory of at most `capacity` ended sessions.
    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// Whether the session with this family id was found ended and tokens of it may still be live.
    func contains(_ familyId: String, now: Date) -> Bool {
        ended.withLock { ($0[familyId] ?? .distantPast) > now }
    }

    /// Keeps the session with this family id as ended until `until` (its last token's expiry).
    func insert(_ familyId: String, until: Date, now: Date) {
        ended.withLock { ended in
            if ended.count >= capacity, ended[familyId] == nil {
                ended = ended.filter { $0.value > now }
                guard ended.count < capacity else { return }
            }
            ended[familyId] = max(until, ended[familyId] ?? .distantPast)
        }
    }

    /// The sessions kept (for tests).
    var count: Int { ended.withLock { $0.count } }
}
