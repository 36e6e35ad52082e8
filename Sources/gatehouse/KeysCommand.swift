import ArgumentParser
import Foundation
import GatehouseCore
import GatehouseServer
import Logging

/// `gatehouse keys`: service keys for internal services, managed in the same store a running
/// gateway uses.
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys", abstract: "Create, list and revoke service keys; rotate signing and encryption keys.",
        subcommands: [CreateService.self, List.self, Revoke.self, RotateSigning.self, RotateEncryption.self])

    /// The commands print their own results; the store's logs would only add noise.
    static let quiet = Logger(label: "gatehouse-keys") { _ in SwiftLogNoOpLogHandler() }

    /// Where key management's audit events are written first: JSON lines on standard error,
    /// like the gateway's (the trail of record).
    static let auditLogger = Logger(label: "gatehouse") { JSONLogHandler(label: $0, sink: LogSink(capture: false)) }

    /// Runs `body` with an audit log whose events are also stored in `storage`'s trail, the
    /// one the console's activity listing and `GET /v1/admin/activity` read, and stores them
    /// before the store closes, whether `body` succeeds or fails.
    static func audited<T>(_ storage: any GatehouseStorage, _ body: (AuditLog) async throws -> T) async throws -> T {
        // The retention only drives a running gateway's hourly purge, which a command never runs.
        let trail = AuditTrail(
            storage: storage, retention: GatewayConfiguration(publicURL: "", returnToAllowList: []).auditRetention, clock: SystemClock(),
            metrics: .disabled, logger: auditLogger)
        let audit = AuditLog(logger: auditLogger, trail: trail)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(audit))
        } catch {
            result = .failure(error)
        }
        if await !trail.flush() {
            FileHandle.standardError.write(
                Data("warning: the audit events above were not stored for the activity listing; the log lines are the record\n".utf8))
        }
        return try result.get()
    }

    /// Runs `body` with the key service over `storage`: audited into the stored trail, and
    /// recording `service-key.*` webhook events for the endpoints the settings configure (a
    /// running gateway delivers them from the store).
    static func withService<T>(_ storage: any GatehouseStorage, environment: [String: String], _ body: (ServiceKeyService) async throws -> T)
        async throws -> T
    {
        var gateway = GatewayConfiguration(publicURL: "http://127.0.0.1", returnToAllowList: [])
        try ProfileSettings.applyWebhooks(environment, TypedSettings(environment: environment), to: &gateway)
        let endpoints = gateway.webhooks?.endpoints ?? []
        return try await audited(storage) { audit in
            var service = ServiceKeyService(storage: storage, audit: audit)
            if !endpoints.isEmpty { service.events = EventRecorder(endpoints: endpoints, metrics: .disabled, wake: {}) }
            return try await body(service)
        }
    }

    /// `keys create-service NAME --scopes a,b`: prints the secret alone on the last line.
    struct CreateService: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create-service", abstract: "Create a service key; the secret is printed once.")

        @Argument(help: "A name for the key.")
        var name: String

        @Option(
            help:
                "Comma-separated scopes: profile:read, photo:read, admin, admin:users, admin:keys, admin:webhooks, users:claims, api:<provider id>, tokens:<provider id>."
        )
        var scopes: String

        @OptionGroup var store: StoreOptions

        func run() async throws {
            let scopes = scopes.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let name = name
            let environment = try await store.settings()
            let created = try await store.withStore(environment: environment, logger: KeysCommand.quiet) { storage in
                try await KeysCommand.withService(storage, environment: environment) { try await $0.create(name: name, scopes: scopes) }
            }
            print("Created service key \(created.key.id) (\(created.key.name)) with scopes \(created.key.scopes.joined(separator: ",")).")
            print("The secret is shown once; send it as Authorization: Bearer <secret>.")
            print(created.secret)
        }
    }

    /// `keys list`: id, name, scopes, created, revoked — never secrets.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List service keys (never their secrets).")

        @OptionGroup var store: StoreOptions

        func run() async throws {
            let formatter = ISO8601DateFormatter()
            let keys = try await store.withStore(environment: try await store.settings(), logger: KeysCommand.quiet) { storage in
                try await ServiceKeyService(storage: storage).list()
            }
            for key in keys {
                let state = key.revokedAt.map { "revoked \(formatter.string(from: $0))" } ?? "active"
                // A name stored before names were held to plain text is printed with its
                // controls escaped: the terminal shows them, rather than obeying them.
                // A backslash is doubled, so an escape printed here is never a name's own text.
                let name = key.name.unicodeScalars.map { scalar in
                    scalar == "\\" ? "\\\\" : scalar.showsAsItself ? String(scalar) : "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
                }.joined()
                print("\(key.id)\t\(name)\t\(key.scopes.joined(separator: ","))\tcreated \(formatter.string(from: key.createdAt))\t\(state)")
            }
        }
    }

    /// `keys revoke ID`.
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a service key.")

        @Argument(help: "The key id (from keys list).")
        var id: String

        @OptionGroup var store: StoreOptions

        func run() async throws {
            let id = id
            let environment = try await store.settings()
            let revoked = try await store.withStore(environment: environment, logger: KeysCommand.quiet) { storage in
                try await KeysCommand.withService(storage, environment: environment) { try await $0.revoke(id: id) }
            }
            guard revoked else {
                throw GatehouseError(code: .notFound, detail: "No active key \(id).")
            }
            print("Revoked \(id).")
        }
    }

    /// `gatehouse keys rotate-signing`.
    struct RotateSigning: AsyncParsableCommand {
        /// The command's name and help.
        static let configuration = CommandConfiguration(
            commandName: "rotate-signing",
            abstract:
                "Add a new ES256 signing key: published at once, signing after 90 s (when every instance has loaded it and no cached JWKS lacks it); the JWKS keeps the old key while its tokens live."
        )

        /// Which store.
        @OptionGroup var store: StoreOptions

        /// Adds the key and prints its kid.
        func run() async throws {
            let environment = try await store.settings()
            // A demo's data folder keeps its own key when none is configured.
            let keys = try VaultSettings.keys(environment: environment) {
                guard store.databaseURL == nil, environment["GATEHOUSE_DATABASE_URL"] == nil else {
                    throw ValidationError("GATEHOUSE_ENCRYPTION_KEY is required with a database URL")
                }
                let folder = try store.folder(environment: environment)
                try DemoCommand.requireDemoFolder(folder)
                return try DemoCommand.demoKey(dataDir: folder)
            }
            let kid = try await store.withStore(environment: environment, logger: KeysCommand.quiet) { storage in
                try await KeysCommand.audited(storage) { audit in
                    let kid = try await SigningKeyRing.addKey(storage: storage, vault: try TokenVault(keys: keys, store: storage))
                    audit.record(.signingKeyRotated, by: .commandLine, keyId: kid)
                    return kid
                }
            }
            print("New signing key \(kid).")
        }
    }

    /// `gatehouse keys rotate-encryption`.
    struct RotateEncryption: AsyncParsableCommand {
        /// The command's name and help.
        static let configuration = CommandConfiguration(
            commandName: "rotate-encryption",
            abstract: "Move every stored secret to a new data key, wrapped by GATEHOUSE_ENCRYPTION_KEY.",
            discussion: """
                Provider tokens and signing keys are sealed with data keys kept in the database, wrapped by the
                configured key. This re-wraps the data keys under GATEHOUSE_ENCRYPTION_KEY (old configured keys go in
                GATEHOUSE_PREVIOUS_ENCRYPTION_KEYS meanwhile), adds a new data key, waits until every instance seals
                with it (two reload intervals and one retry window, GATEHOUSE_REFRESH_RETRY_WINDOW: 70 s by default),
                re-encrypts everything in batches while instances keep serving,
                and deletes old data keys nothing uses. When it reports nothing remaining, previous configured keys
                may be removed; pending credentials keep an old key alive at most 10 minutes (run again with
                --keep-data-key to finish).
                """)

        /// Links read per page.
        @Option(help: "Links per batch.")
        var batchSize = 200

        /// Finish an earlier rotation instead of starting one.
        @Flag(help: "Do not add a data key: re-encrypt what is left and retire unused keys, without waiting.")
        var keepDataKey = false

        /// The instances' reload interval (tests and unusual deployments change it).
        @Option(help: .hidden)
        var reloadSeconds: Double = 30

        /// Which store.
        @OptionGroup var store: StoreOptions

        /// Runs the rotation and prints its report; unreadable links fail the command.
        func run() async throws {
            let environment = try await store.settings()
            let keys = try VaultSettings.keys(environment: environment)
            try await store.withStore(environment: environment, logger: KeysCommand.quiet) { storage in
                try await KeysCommand.audited(storage) { audit in
                    try await rotate(storage: storage, keys: keys, environment: environment, audit: audit)
                }
            }
        }

        /// The rotation itself, while the store is open.
        private func rotate(storage: any GatehouseStorage, keys: [Data], environment: [String: String], audit: AuditLog) async throws {
            let vault = try TokenVault(keys: keys, store: storage, reloadInterval: reloadSeconds)
            var gateway = GatewayConfiguration(publicURL: "", returnToAllowList: [])
            try ProfileSettings.applyRetryWindow(environment, to: &gateway)
            let window = gateway.refreshRetryWindow
            if !keepDataKey { print("Adding a data key; waiting \(Int(2 * reloadSeconds + window)) s until every instance seals with it…") }
            let report = try await EncryptionRotation(storage: storage, vault: vault, retryWindow: window).run(
                batchSize: batchSize, newDataKey: !keepDataKey)
            audit.record(.encryptionKeyRotated, by: .commandLine, keyId: vault.currentLabel)
            print(
                "Data keys: \(report.rewrappedDataKeys) re-wrapped under configured key \(vault.currentKeyID), \(report.unreadableDataKeys) unreadable; sealing with \(vault.currentLabel)."
            )
            print(
                "Scanned \(report.scanned) links: \(report.resealed) re-encrypted, \(report.alreadyCurrent) already current, \(report.changedMeanwhile) changed meanwhile, \(report.unreadable) unreadable; \(report.resealedSigningKeys) signing keys re-encrypted."
            )
            print("Retired data keys: \(report.retiredDataKeys.isEmpty ? "none" : report.retiredDataKeys.joined(separator: ", ")).")
            let remaining = report.remaining.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
            print(remaining.isEmpty ? "Nothing remains under older keys." : "Still under older keys: \(remaining.joined(separator: ", ")).")
            if report.unreadable > 0 || report.unreadableDataKeys > 0 {
                throw ValidationError(
                    "\(report.unreadable) links and \(report.unreadableDataKeys) data keys could not be opened with any configured key; their users must sign in again"
                )
            }
        }
    }
}
