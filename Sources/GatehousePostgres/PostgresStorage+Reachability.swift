import Foundation
import NIOSSL
import PostgresNIO

extension PostgresStorage {
    /// Throws unless the database answers within the operation timeout, saying why: what the
    /// server answered when it refused the connection (an unknown role, a wrong password, a
    /// missing database: its SQLSTATE and message, at once), a TLS failure (at once), or that
    /// nothing answered until the timeout (host, port and database; never the password). A
    /// server that is starting or shutting down (SQLSTATE 57P0x) is waited for like one that
    /// does not answer yet. A pool with no server queues every request, `migrate` included,
    /// until one appears: a caller that must not wait without a word asks this first. The error
    /// is `isUnreachable` in each case, so a server waits for an operator to fix the database
    /// while one-shot commands stop.
    public func awaitReachable() async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + operationTimeout
        while let problem = await connectionProblem(within: deadline - clock.now) {
            guard problem.isTransient, clock.now + Self.probePause < deadline else { throw problem.error }
            try await Task.sleep(for: Self.probePause)
        }
        do {
            try await ping(within: max(deadline - clock.now, .seconds(1)))
        } catch {
            throw unreachable
        }
        await checkStatementTimeout()
        await checkDurability()
    }

    /// Warns when the server acknowledges commits it may lose: `synchronous_commit = off`
    /// (for the role, the database or the server) answers a commit before its WAL is on disk,
    /// and a database crash then loses writes Gatehouse answered `2xx`. Nothing is refused (a
    /// test cluster may run so on purpose); the warning says what to set. (`fsync = off`, the
    /// server's own choice to risk corruption, is the server operator's to see.)
    func checkDurability() async {
        guard let rows = try? await query("SHOW synchronous_commit", logger: logger),
            let shown = try? rows.first?.decode(String.self), shown == "off"
        else { return }
        logger.warning(
            "the database acknowledges commits before they are on disk: a database crash loses writes Gatehouse answered as done (ALTER ROLE … SET synchronous_commit = on)",
            metadata: ["db.setting": "synchronous_commit", "db.setting.value": "\(shown)"])
    }

    /// Warns when the pool's connections do not carry the `statement_timeout` every connection
    /// asks for at its start: a pooler between Gatehouse and the server that drops startup
    /// parameters (PgBouncer's `ignore_startup_parameters`) leaves the role's setting, and the
    /// server then no longer ends a statement whose caller was answered `503` (`write`). Nothing
    /// is refused: the warning names the setting each connection has and the one to give the
    /// role. A connection that cannot answer says nothing here (the requests will).
    func checkStatementTimeout() async {
        let expected = Self.milliseconds(operationTimeout)
        guard let rows = try? await query("SHOW statement_timeout", logger: logger),
            let shown = try? rows.first?.decode(String.self), Self.settingMilliseconds(shown) != expected
        else { return }
        logger.warning(
            "the database's connections do not run with Gatehouse's statement_timeout (a pooler between may drop startup parameters): set it for Gatehouse's role (ALTER ROLE … SET statement_timeout = '\(expected)ms')",
            metadata: ["db.statement_timeout": "\(shown)", "db.statement_timeout.expected": "\(expected)ms"])
    }

    /// A time setting as `SHOW` gives it (`0`, `250ms`, `5s`, `1min`, `2h`, `1d`), in
    /// milliseconds; `nil` for any other form.
    static func settingMilliseconds(_ shown: String) -> Int? {
        let digits = shown.prefix { $0.isASCII && $0.isNumber }
        guard let value = Int(digits) else { return nil }
        let units = ["": 1, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000]
        return units[String(shown.dropFirst(digits.count))].map { value * $0 }
    }

    /// The pause between two connection attempts while the database does not answer.
    private static let probePause = Duration.milliseconds(200)

    /// Why one connection could not be opened, and whether waiting may help.
    private struct ConnectionProblem {
        /// What to tell the operator.
        let error: PostgresStorageError
        /// Nothing answered, or the server is starting or stopping.
        let isTransient: Bool
    }

    /// The error for a database nothing answers at.
    private var unreachable: PostgresStorageError {
        let seconds = Double(operationTimeout.components.seconds) + Double(operationTimeout.components.attoseconds) / 1e18
        return PostgresStorageError(
            "cannot reach the PostgreSQL database at \(location) within \(seconds.formatted()) s (GATEHOUSE_DATABASE_TIMEOUT)", unreachable: true)
    }

    /// Opens and closes one connection outside the pool, which retries a refused connection
    /// and keeps the server's answer to itself: `nil` when it opens (or when no probe
    /// configuration is known), otherwise what went wrong.
    private func connectionProblem(within limit: Duration) async -> ConnectionProblem? {
        guard let probe else { return nil }
        let configuration: PostgresConnection.Configuration
        switch probe {
        case .success(let value): configuration = value
        case .failure(let error):
            return ConnectionProblem(
                error: PostgresStorageError("cannot use the TLS settings of the PostgreSQL database URL (sslrootcert): \(error)", unreachable: true),
                isTransient: false)
        }
        let logger = self.logger
        let server = "the PostgreSQL server at \(location)"
        do {
            try await withinTimeout(max(limit, .milliseconds(100))) {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
                try? await connection.close()
            }
            return nil
        } catch let error as PSQLError where error.serverInfo != nil {
            // 57P01–57P03: shutting down, crashed, starting up; 53300: no connection slot free.
            let state = error.serverInfo?[.sqlState] ?? ""
            let transient = state.hasPrefix("57P") || state == "53300"
            return ConnectionProblem(
                error: PostgresStorageError("\(server) refused the connection: \(error.storeFailureSummary)", unreachable: true),
                isTransient: transient)
        } catch let error as PSQLError where error.code == .authMechanismRequiresPassword {
            return ConnectionProblem(
                error: PostgresStorageError("\(server) asks for a password, and the database URL gives none", unreachable: true),
                isTransient: false)
        } catch let error as PSQLError where [.unsupportedAuthMechanism, .saslError].contains(error.code) {
            return ConnectionProblem(
                error: PostgresStorageError("\(server) asks for an authentication this client cannot give (\(error.code))", unreachable: true),
                isTransient: false)
        } catch let error as PSQLError where error.code == .sslUnsupported {
            return ConnectionProblem(
                error: PostgresStorageError("\(server) does not offer TLS, which the URL's sslmode requires", unreachable: true), isTransient: false)
        } catch let error as PSQLError
            where error.underlying is NIOSSLError || error.underlying is NIOSSLExtraError || error.underlying is BoringSSLError
        {
            return ConnectionProblem(
                error: PostgresStorageError("TLS with \(server) failed: \(error.underlying.map { "\($0)" } ?? "")", unreachable: true),
                isTransient: false)
        } catch {
            return ConnectionProblem(error: unreachable, isTransient: true)
        }
    }
}
