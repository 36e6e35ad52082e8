/// Every metric the gateway exports under its own name, with its `# HELP` text and labels: the
/// registry gets the help from here (`DescribedMetricsFactory`), and the Operating article's metrics table
/// is generated from here (`gatehouse config metrics`; a test compares).
public enum MetricsCatalog {
    /// One metric family.
    public struct Entry: Sendable {
        /// The exported name.
        public let name: String
        /// `counter`, `gauge` or `histogram`.
        public let type: String
        /// Its labels.
        public let labels: [String]
        /// The `# HELP` text.
        public let help: String
    }

    /// The families, in the table's order.
    public static let all: [Entry] = [
        Entry(name: "gatehouse_build_info", type: "gauge", labels: ["version", "commit"], help: "The running build: version and commit, value 1."),
        Entry(
            name: "gatehouse_http_requests_total", type: "counter", labels: ["method", "route", "status"],
            help: "Requests answered, by method, route template and status."),
        Entry(
            name: "gatehouse_http_request_duration_seconds", type: "histogram", labels: ["route"],
            help: "Time to answer a request, by route template."),
        Entry(
            name: "gatehouse_connections_cut_total", type: "counter", labels: ["listener", "reason"],
            help:
                "Connections a listener closed because the client was too slow or asked for an upgrade, by listener (public, operations) and reason (slow-body, unread-answer, upgrade); idle connections closed at the idle timeout are not counted."
        ),
        Entry(
            name: "gatehouse_malformed_requests_total", type: "counter", labels: ["listener"],
            help:
                "Request heads refused as not HTTP (400 invalid-argument, the connection closed), by listener; not in gatehouse_http_requests_total."
        ),
        Entry(
            name: "gatehouse_large_request_heads_total", type: "counter", labels: ["listener"],
            help:
                "Requests whose client would keep the connection open but whose head was over 8 KB (each field counted for what keeping it costs): marked Connection: close, the connection's last request, by listener."
        ),
        Entry(
            name: "gatehouse_accept_failures_total", type: "counter", labels: ["listener"],
            help:
                "Accepts that failed for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), and connections that took the last descriptor, by listener; the listener pauses accepting 50 ms after each, and on while no descriptor is free beside the one it keeps in reserve."
        ),
        Entry(
            name: "gatehouse_connections_open", type: "gauge", labels: ["listener"],
            help: "Connections a listener holds open, by listener (public, operations)."),
        Entry(
            name: "gatehouse_connections_limit", type: "gauge", labels: ["listener"],
            help:
                "The most connections a listener holds open (GATEHOUSE_MAX_CONNECTIONS for the public one); at the limit it stops accepting until one closes."
        ),
        Entry(
            name: "gatehouse_connection_limit_reached_total", type: "counter", labels: ["listener"],
            help: "Times a listener reached its connection limit and stopped accepting; new connections waited in the listen backlog."),
        Entry(
            name: "gatehouse_sign_ins_total", type: "counter", labels: ["provider", "mode", "outcome"],
            help: "Completed sign-in flows, by provider, mode and outcome (ok or the error code)."),
        Entry(
            name: "gatehouse_upstream_calls_in_flight", type: "gauge", labels: [],
            help: "Calls to providers, hooks and webhook receivers in flight now."),
        Entry(
            name: "gatehouse_upstream_calls_waiting", type: "gauge", labels: [],
            help: "Calls waiting for one in flight to end (at most as many as the limit in each of two lines, each within its timeout)."),
        Entry(
            name: "gatehouse_upstream_calls_limit", type: "gauge", labels: [],
            help: "The most calls in flight at once (GATEHOUSE_UPSTREAM_CALLS)."),
        Entry(
            name: "gatehouse_upstream_calls_refused_total", type: "counter", labels: [],
            help:
                "Calls refused without being sent because as many were in flight and waiting as allowed, in all (503 upstream-unavailable), for their provider or the hooks (half of the limit: 503 upstream-unavailable or hook-unavailable) or for their user (429 rate-limited)."
        ),
        Entry(
            name: "gatehouse_upstream_calls_total", type: "counter", labels: ["provider", "endpoint", "outcome"],
            help:
                "Calls to providers, by endpoint kind and outcome (ok, not-modified, client-error, rate-limited, server-error, timeout, transport-error)."
        ),
        Entry(
            name: "gatehouse_upstream_call_duration_seconds", type: "histogram", labels: ["provider", "endpoint", "outcome"],
            help: "Time from a provider call to its response head."),
        Entry(
            name: "gatehouse_cache_lookups_total", type: "counter", labels: ["cache", "result"],
            help: "Lookups in the in-memory caches, by cache and result (hit, miss, stale)."),
        Entry(
            name: "gatehouse_cache_used", type: "gauge", labels: ["cache"],
            help:
                "What each in-memory cache holds against its budget: bytes for photo (the memory its photos take, within `GATEHOUSE_PHOTO_CACHE_BYTES`), profile (about the memory its live profiles take, their providers' answers included, within 32 MiB: thousands of profiles of a few KB, fewer when providers answer more) and account (about the memory of the accounts, links and sessions held for signed-in reads, the links' stored profiles and sealed tokens included, within 32 MiB beside `GATEHOUSE_ACCOUNT_CACHE_SIZE`), entries for photo-failure."
        ),
        Entry(
            name: "gatehouse_provider_api_buffered_bytes", type: "gauge", labels: [],
            help: "Bytes of provider API answers read whole (Graph's JSON) held in memory, against GATEHOUSE_API_BUFFER_BYTES."),
        Entry(
            name: "gatehouse_token_refreshes_total", type: "counter", labels: ["provider", "outcome"],
            help:
                "Provider token refreshes, by outcome (ok, reused, superseded, unwritten, dead-grant, failed; held-back: a provider's refusal not refreshed, Provider APIs)."
        ),
        Entry(
            name: "gatehouse_circuit_state", type: "gauge", labels: ["provider"],
            help: "A provider's or a blocking hook's (provider hook:<event>) circuit breaker: 0 closed, 1 half-open, 2 open."),
        Entry(
            name: "gatehouse_circuit_transitions_total", type: "counter", labels: ["provider", "state"],
            help: "Circuit breaker transitions, by provider (or hook:<event>) and new state."),
        Entry(name: "gatehouse_photo_bytes_total", type: "counter", labels: [], help: "Photo bytes sent to callers, streamed or from the cache."),
        Entry(
            name: "gatehouse_provider_api_calls_total", type: "counter", labels: ["provider", "template", "outcome"],
            help: "Provider API passthrough calls, by provider, allowed path template and outcome."),
        Entry(
            name: "gatehouse_provider_tokens_issued_total", type: "counter", labels: ["provider"],
            help: "Provider access tokens handed to services by the token vault."),
        Entry(
            name: "gatehouse_hook_calls_total", type: "counter", labels: ["hook", "outcome"],
            help:
                "Blocking hook calls, by hook and outcome (allow, deny, timeout, unreachable, bad-status, too-large, invalid-answer, circuit-open, overloaded)."
        ),
        Entry(name: "gatehouse_hook_call_duration_seconds", type: "histogram", labels: ["hook", "outcome"], help: "Time of a blocking hook call."),
        Entry(
            name: "gatehouse_webhook_events_total", type: "counter", labels: ["type"],
            help: "Webhook events written with the changes they report, by type."),
        Entry(
            name: "gatehouse_webhook_deliveries_total", type: "counter", labels: ["endpoint", "outcome"],
            help:
                "Webhook delivery attempts, by endpoint and outcome (delivered, retry, failed; gone: a 410 or its pause; overloaded and late-claim: not sent; cut-short: no answer within a delivery a late claim shortened; none of these three spends an attempt; not-taken: a type the endpoint does not take, no attempt spent within its grace)."
        ),
        Entry(
            name: "gatehouse_webhook_delivery_duration_seconds", type: "histogram", labels: ["endpoint", "outcome"],
            help: "Time of a webhook delivery attempt."),
        Entry(
            name: "gatehouse_webhook_delivery_delay_seconds", type: "histogram", labels: ["endpoint"],
            help: "Time from an event's commit to its delivery."),
        Entry(
            name: "gatehouse_webhook_events_dropped_total", type: "counter", labels: ["endpoint"],
            help: "Undelivered webhook events dropped after the retention."),
        Entry(name: "gatehouse_webhook_queue_depth", type: "gauge", labels: [], help: "Webhook events waiting for delivery."),
        Entry(
            name: "gatehouse_webhook_oldest_age_seconds", type: "gauge", labels: [],
            help: "Age of the oldest webhook event waiting for delivery."),
        Entry(
            name: "gatehouse_database_pool_connections_in_use", type: "gauge", labels: [],
            help: "PostgreSQL connections in use (the change feed's included)."),
        Entry(
            name: "gatehouse_database_pool_operations_waiting", type: "gauge", labels: [],
            help: "Store operations waiting for a PostgreSQL connection."),
        Entry(name: "gatehouse_database_pool_connections_max", type: "gauge", labels: [], help: "The PostgreSQL pool's size."),
        Entry(
            name: "gatehouse_audit_events_dropped_total", type: "counter", labels: [],
            help: "Audit events not stored for the activity listing (its buffer was full); the log has every one."),
        Entry(
            name: "gatehouse_ready", type: "gauge", labels: [],
            help: "1 when the last readiness check (/readyz or a scrape) passed, 0 when it failed (shutting down, storage, keys, providers)."),
        Entry(
            name: "gatehouse_storage_reachable", type: "gauge", labels: [],
            help: "1 when the store answered the last readiness check's ping within 500 ms, 0 when it did not."),
    ]

    /// The help of `name`, `""` for a name not in the catalog.
    public static func help(_ name: String) -> String {
        byName[name]?.help ?? ""
    }

    private static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// The Operating article's metrics table (Markdown).
    public static func markdownTable() -> String {
        var lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
        for entry in all {
            let labels = entry.labels.isEmpty ? "—" : entry.labels.map { "`\($0)`" }.joined(separator: ", ")
            lines.append("| `\(entry.name)` | \(entry.type) | \(labels) | \(entry.help) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
