/// One provider-token refresh at a time per linked identity in this process: concurrent
/// requests that find the access token dead share the refresh that is already running.
/// Across instances, the store's lock (`GatehouseStorage.withLock`) serializes the rest.
actor TokenRefresher {
    private var inFlight: [String: Task<ProviderTokens, any Error>] = [:]

    /// The result of the running refresh for `key`, or of `operation` started now.
    func refreshed(key: String, operation: @escaping @Sendable () async throws -> ProviderTokens) async throws -> ProviderTokens {
        if let running = inFlight[key] { return try await running.value }
        let task = Task { try await operation() }
        inFlight[key] = task
        defer { inFlight[key] = nil }
        return try await task.value
    }
}
