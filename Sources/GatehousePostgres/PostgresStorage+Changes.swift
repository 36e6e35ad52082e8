import GatehouseCore
import Logging
import PostgresNIO

extension PostgresStorage: SharedStore {
    /// The channel the schema's triggers notify with the uid of each changed account, or the
    /// id of a changed service key behind `serviceKeyPayloadPrefix`.
    static let changeChannel = "gatehouse_account_changes"
    /// Marks a service key's id on the change channel (uids never contain a colon).
    static let serviceKeyPayloadPrefix = "service-key:"

    /// Listens on the change channel with one connection of the pool until the task is
    /// cancelled; throws when that connection is lost (the server restarted, the network).
    public func followChanges(_ body: @escaping @Sendable (StoreChange) async -> Void) async throws {
        let logger = self.logger
        // Counted in the pool's gauges: this connection is one the other operations cannot have.
        try await usage.counting {
            try await followChanges(body, logger: logger)
        }
    }

    private func followChanges(_ body: @escaping @Sendable (StoreChange) async -> Void, logger: Logger) async throws {
        try await client.withConnection { connection in
            try await connection.listen(on: Self.changeChannel) { notifications in
                // `listen` returns once the server has confirmed LISTEN: from here on nothing
                // committed is missed.
                await body(.following)
                for try await notification in notifications {
                    let payload = notification.payload
                    if payload.hasPrefix(Self.serviceKeyPayloadPrefix) {
                        await body(.serviceKey(id: String(payload.dropFirst(Self.serviceKeyPayloadPrefix.count))))
                    } else {
                        await body(.account(uid: payload))
                    }
                }
                logger.debug("change feed ended")
            }
        }
    }
}
