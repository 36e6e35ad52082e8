import GatehouseCore
import Synchronization

/// What one request is served under, bound as one task-local while it is handled (and
/// inherited by the tasks it starts): its id, answered as `X-Request-Id` and written in its
/// problem documents and in every log line of its handling; the caller's own id when it was
/// not adopted; and who the request turned out to be, for its access-log line.
///
/// One binding rather than one per value: each `TaskLocal.withValue` adds two async frames
/// and a task-local item to the connection's task, whose stack slabs stay allocated while the
/// connection is open (Performance.md, Design notes).
final class RequestScope: Sendable {
    /// The request's id (`RequestIDAssignment`).
    let id: String
    /// The `X-Request-Id` the caller sent when it was not adopted (the caller is not a trusted
    /// proxy): logged as a field of its own, so that one caller cannot make its lines pass for
    /// another request's, and a client's own id can still be searched for.
    let offered: String?
    private let actor = Mutex<(field: String, id: String)?>(nil)

    /// The scope of the request this task serves, if any.
    @TaskLocal static var current: RequestScope?

    /// A scope for a request served under `id`.
    init(id: String, offered: String?) {
        self.id = id
        self.offered = offered
    }

    /// Records that the request this task serves is a signed-in user's (`user.id`). The access
    /// log runs outside the credential checks, which routes run lazily, so the checks leave
    /// their answer here.
    static func user(_ uid: String) { current?.actor.withLock { $0 = ("user.id", uid) } }

    /// Records that the request this task serves is a service key's (`key.id`).
    static func serviceKey(_ id: String) { current?.actor.withLock { $0 = ("key.id", id) } }

    /// The access-log field and id of who the request turned out to be, once known.
    var actorField: (field: String, id: String)? { actor.withLock { $0 } }
}
