import Synchronization

/// Who a request turned out to be, for its access-log line: the access log runs outside the
/// credential checks, which routes run lazily, so the checks leave their answer here (in the
/// task-local the access log sets for the request).
final class RequestActor: Sendable {
    private let value = Mutex<(field: String, id: String)?>(nil)

    /// The actor of the request this task serves, when the access log set one.
    @TaskLocal static var current: RequestActor?

    /// A signed-in user (`user.id`).
    static func user(_ uid: String) { current?.value.withLock { $0 = ("user.id", uid) } }

    /// A service key (`key.id`).
    static func serviceKey(_ id: String) { current?.value.withLock { $0 = ("key.id", id) } }

    /// The log field and id, once known.
    var field: (field: String, id: String)? { value.withLock { $0 } }
}
