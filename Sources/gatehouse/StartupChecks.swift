import Foundation
import GatehouseCore
import GatehouseServer
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// What `serve` and `demo` check and say before they listen: the descriptor limit, what is
/// starting, and whether the configured encryption keys open the store's data keys.
enum StartupChecks {
    /// The highest soft descriptor limit asked for, whatever the hard limit says.
    static let descriptorCeiling: rlim_t = 1 << 20

    /// Raises the soft limit on open files to the hard one (at most `descriptorCeiling`), as Go
    /// servers do: one descriptor per connection, and the usual soft default of 1024 caps the
    /// gateway at about a thousand connections. Logs the limit in force; warns when it is low.
    @discardableResult
    static func raiseDescriptorLimit(logger: Logger) -> (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let wanted = min(limit.rlim_max, descriptorCeiling)
        if limit.rlim_cur < wanted {
            var raised = limit
            raised.rlim_cur = wanted
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let metadata: Logger.Metadata = ["fd.limit": .stringConvertible(limit.rlim_cur), "fd.hard_limit": .stringConvertible(limit.rlim_max)]
        if limit.rlim_cur < 4096 {
            logger.warning(
                "the open-file limit allows few connections (one descriptor each): raise the hard limit (LimitNOFILE, ulimit -Hn)", metadata: metadata
            )
        } else {
            logger.info("open-file limit", metadata: metadata)
        }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// The public listener's connection limit: `configured` (`GATEHOUSE_MAX_CONNECTIONS`) or
    /// what `ConnectionLimit.fitting` leaves under `descriptorLimit` and the cgroup's memory
    /// limit. Logs it; warns when a configured limit is above what fits, since a gateway holding
    /// that many connections can run out of descriptors or memory, and when what fits is so
    /// few that a handful of clients can hold every connection.
    static func connectionLimit(
        configured: Int?, descriptorLimit: Int, upstreamConnections: Int, databaseConnections: Int, operationsListener: Bool,
        memoryLimit: Int? = ConnectionLimit.memoryLimit(), memoryKept: Int, logger: Logger
    ) -> Int {
        let fitting = ConnectionLimit.fitting(
            descriptorLimit: descriptorLimit, upstreamConnections: upstreamConnections, databaseConnections: databaseConnections,
            operationsListener: operationsListener, memoryLimit: memoryLimit, memoryKept: memoryKept)
        let limit = configured ?? fitting
        var metadata: Logger.Metadata = [
            "connections.max": .stringConvertible(limit), "connections.fitting": .stringConvertible(fitting),
            "fd.limit": .stringConvertible(descriptorLimit),
        ]
        if let memoryLimit {
            metadata["memory.limit"] = .stringConvertible(memoryLimit)
            metadata["memory.kept"] = .stringConvertible(memoryKept)
        }
        if limit > fitting {
            logger.warning(
                "GATEHOUSE_MAX_CONNECTIONS is above what the open-file and memory limits leave for connections: the gateway can run out of descriptors or memory; raise the limits (LimitNOFILE, ulimit -Hn, the container's memory) or lower GATEHOUSE_MAX_CONNECTIONS",
                metadata: metadata)
        } else if configured == nil && fitting < minimumUseful {
            logger.warning(
                memoryLimit == nil
                    ? "the open-file limit leaves room for few connections: raise it (LimitNOFILE, ulimit -Hn)"
                    : "the open-file and memory limits leave room for few connections: raise them (LimitNOFILE, ulimit -Hn, the container's memory) or lower GATEHOUSE_PHOTO_CACHE_BYTES",
                metadata: metadata)
        } else {
            logger.info("connection limit", metadata: metadata)
        }
        return limit
    }

    /// Calls to providers, hooks and webhook receivers in flight at once: `configured`
    /// (`GATEHOUSE_UPSTREAM_CALLS`) or what `ConnectionLimit.upstreamCalls` fits in the
    /// descriptors kept for them (and the cgroup's memory limit beside `memoryKept`), one
    /// user's share of them: `configuredPerUser`
    /// (`GATEHOUSE_UPSTREAM_CALLS_PER_USER`) or `ConnectionLimit.upstreamCallsPerUser`, and the
    /// slots kept for the gateway's own flows: `configuredReserved`
    /// (`GATEHOUSE_UPSTREAM_CALLS_RESERVED`, at most all but one) or
    /// `ConnectionLimit.upstreamCallsReserved`. Logs the three and one provider's share
    /// (`ConnectionLimit.upstreamCallsPerProvider`); warns when a configured number is above
    /// what fits.
    static func upstreamCalls(
        configured: Int?, configuredPerUser: Int?, configuredReserved: Int?, descriptorLimit: Int, upstreamConnections: Int,
        databaseConnections: Int, operationsListener: Bool, memoryLimit: Int? = ConnectionLimit.memoryLimit(), memoryKept: Int,
        logger: Logger
    ) -> (calls: Int, perUser: Int, reserved: Int) {
        let fitting = ConnectionLimit.upstreamCalls(
            descriptorLimit: descriptorLimit, upstreamConnections: upstreamConnections, databaseConnections: databaseConnections,
            operationsListener: operationsListener, memoryLimit: memoryLimit, memoryKept: memoryKept)
        let limit = configured ?? fitting
        let perUser = configuredPerUser ?? ConnectionLimit.upstreamCallsPerUser(of: limit)
        let reserved = min(configuredReserved ?? ConnectionLimit.upstreamCallsReserved(of: limit), limit - 1)
        let metadata: Logger.Metadata = [
            "upstream.calls": .stringConvertible(limit), "upstream.calls.fitting": .stringConvertible(fitting),
            "upstream.calls.per_user": .stringConvertible(perUser), "upstream.calls.reserved": .stringConvertible(reserved),
            "upstream.calls.per_provider": .stringConvertible(ConnectionLimit.upstreamCallsPerProvider(of: limit)),
        ]
        if let configuredReserved, configuredReserved > reserved {
            logger.warning(
                "GATEHOUSE_UPSTREAM_CALLS_RESERVED leaves no slot for passthrough calls, photos and webhooks: one slot is left to them",
                metadata: metadata)
        }
        if limit > fitting {
            logger.warning(
                "GATEHOUSE_UPSTREAM_CALLS is above what the open-file and memory limits keep for calls to providers: slow providers can take the descriptors or memory every connection needs; raise the limits (LimitNOFILE, ulimit -Hn, the container's memory) or lower GATEHOUSE_UPSTREAM_CALLS",
                metadata: metadata)
        } else {
            logger.info("upstream call limit", metadata: metadata)
        }
        return (limit, perUser, reserved)
    }

    /// Fewer connections than this at once are warned of: a few keep-alive clients hold them all.
    static let minimumUseful = 256

    /// One line naming what starts: version, commit, store and providers; a warning when no
    /// provider is configured (nobody could sign in).
    static func announce(store: String, providers: [String], logger: Logger) {
        logger.info(
            "Gatehouse starting",
            metadata: [
                "version": "\(Gatehouse.version)", "commit": "\(Gatehouse.commit)", "store": "\(store)",
                "providers": .array(providers.map { .string($0) }),
            ])
        if providers.isEmpty {
            logger.warning(
                "no identity provider is configured: nobody can sign in (set GATEHOUSE_GITHUB_CLIENT_ID, GATEHOUSE_MICROSOFT_CLIENT_ID, GATEHOUSE_YAHOO_CLIENT_ID or GATEHOUSE_OIDC_<NAME>_ISSUER)"
            )
        }
    }

    /// Warns of each provider whose passthrough uploads may take as long as the idle timeout
    /// (`GATEHOUSE_IDLE_TIMEOUT`) or longer. While a provider reads an upload slowly, the
    /// gateway reads its client's body no faster, and the listener cuts a body that falls
    /// behind for the idle timeout (408): such an upload fails before its provider's timeout.
    static func warnAboutUploadTimeouts(_ configuration: GatewayConfiguration, idleTimeout: Duration, logger: Logger) {
        for (providerId, timeout) in configuration.uploadTimeouts where timeout >= idleTimeout {
            logger.warning(
                "uploads to a provider's API may take as long as GATEHOUSE_IDLE_TIMEOUT: one the provider reads slowly is cut at the idle timeout; keep the provider's timeout (timeoutSeconds, GATEHOUSE_UPSTREAM_TIMEOUTS) below it",
                metadata: [
                    "provider": "\(providerId)", "upstream.timeout_s": "\(Self.seconds(timeout))",
                    "idle_timeout_s": "\(Self.seconds(idleTimeout))",
                ])
        }
    }

    /// Warns of each passthrough template whose paging links every answer drops
    /// (`APIPolicy.pagingGaps`): it lists a page size among its query names but not the name
    /// the provider's next-page links carry, so a caller would see one page and no link.
    static func warnAboutPagingGaps(_ policy: APIPolicy, logger: Logger) {
        for gap in policy.pagingGaps {
            logger.warning(
                "a passthrough template takes a page size but not its provider's paging parameter: every paging link of its answers is dropped; add the parameter to its query list",
                metadata: ["provider": "\(gap.providerId)", "route": "\(gap.route)", "missing": "\(gap.missing)"])
        }
    }

    /// Warns of each passthrough template that allows a provider endpoint making other calls
    /// (`APIPolicy.dispatchers`: Graph's `$batch`, GitHub's GraphQL): the calls in its bodies
    /// are not checked against the policy, so whoever may call it reaches all the grant does.
    static func warnAboutDispatchers(_ policy: APIPolicy, logger: Logger) {
        for dispatcher in policy.dispatchers {
            logger.warning(
                "a passthrough template allows a provider endpoint that makes other calls: the calls in its bodies are not checked against the policy, so its callers reach everything the users' grants do",
                metadata: ["provider": "\(dispatcher.providerId)", "route": "\(dispatcher.route)", "endpoint": "\(dispatcher.endpoint)"])
        }
    }

    /// A duration in seconds, as the settings write it (`2.5`, `75`).
    private static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        guard attoseconds != 0 else { return "\(seconds)" }
        return "\(Double(seconds) + Double(attoseconds) / 1e18)"
    }

    /// The store's kind, for the start-up line.
    static func storeKind(_ environment: [String: String], databaseURL: String?) -> String {
        (databaseURL ?? environment["GATEHOUSE_DATABASE_URL"]).map { $0.isEmpty ? "sqlite" : "postgresql" } ?? "sqlite"
    }

    /// Opens the store's data keys with the configured encryption keys; a key that opens none
    /// stops the start with the reason, instead of a server that fails every sign-in.
    static func requireOpeningKeys(_ vault: TokenVault) async throws {
        do {
            try await vault.reload()
        } catch let error as TokenVault.VaultError {
            throw Refusal(
                "the configured keys do not open the stored data keys (\(error)): GATEHOUSE_ENCRYPTION_KEY is not the key this store's data was sealed with"
            )
        }
    }

    /// Why the process will not start.
    struct Refusal: Error, CustomStringConvertible {
        /// What an operator reads.
        let description: String
        init(_ description: String) { self.description = description }
    }
}
