/// Waiting for an answer at most so long.
public enum Deadline {
    /// `work`'s answer, or `nil` when it did not come within `limit`; the work is then
    /// cancelled (work shared with other callers, such as a `SingleFlight` run, goes on).
    public static func answer<T: Sendable>(within limit: Duration, _ work: @escaping @Sendable () async -> T) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { await work() }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
