/// One provider-token refresh at a time per linked identity in this process: concurrent
/// requests that find the access token dead share the refresh that is already running.
/// Across instances, the store's lock (`GatehouseStorage.withLock`) serializes the rest.
struct TokenRefresher: Sendable {
    private let refreshes = SingleFlight<String, ProviderTokens>()

    /// The result of the running refresh for `key`, or of `operation` started now.
    func refreshed(key: String, operation: @escaping @Sendable () async throws -> ProviderTokens) async throws -> ProviderTokens {
        try await refreshes.run(key, operation)
    }
}
