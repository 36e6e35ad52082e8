import Foundation
import NIOSSL
import PostgresNIO

/// `postgres://user:password@host:port/database?sslmode=…&sslrootcert=…` → a client
/// configuration. `sslmode` is `disable`, `prefer` (the default, as libpq), `require` or
/// `verify-full` (both verify the certificate and host name: there is no unverified TLS here);
/// `sslrootcert` names a PEM file of trusted CAs.
public enum DatabaseURL {
    /// Parses the URL; the error names what is wrong but never repeats the password.
    public static func configuration(_ url: String, maximumConnections: Int = 20) throws -> PostgresClient.Configuration {
        let parts = try Parts(url)
        let tls: PostgresClient.Configuration.TLS
        switch parts.sslMode {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(parts.tlsConfiguration)
        case .require: tls = .require(parts.tlsConfiguration)
        }
        var configuration = PostgresClient.Configuration(
            host: parts.host, port: parts.port, username: parts.user, password: parts.password, database: parts.database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(connectTimeoutSeconds)
        return configuration
    }

    /// The same URL as one connection's configuration: what `PostgresStorage` uses to learn
    /// why its pool cannot connect (the pool keeps the server's answer to itself).
    public static func connectionConfiguration(_ url: String) throws -> PostgresConnection.Configuration {
        let parts = try Parts(url)
        let tls: PostgresConnection.Configuration.TLS
        switch parts.sslMode {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(try NIOSSLContext(configuration: parts.tlsConfiguration))
        case .require: tls = .require(try NIOSSLContext(configuration: parts.tlsConfiguration))
        }
        var configuration = PostgresConnection.Configuration(
            host: parts.host, port: parts.port, username: parts.user, password: parts.password, database: parts.database, tls: tls)
        configuration.options.connectTimeout = .seconds(Int64(connectTimeoutSeconds))
        return configuration
    }

    /// How long opening one connection may take.
    static let connectTimeoutSeconds = 5

    /// The URL's parts, checked.
    private struct Parts {
        /// How the connection uses TLS.
        enum SSLMode { case disable, prefer, require }

        let host: String
        let port: Int
        let user: String
        let password: String?
        let database: String?
        let sslMode: SSLMode
        let tlsConfiguration: TLSConfiguration

        init(_ url: String) throws {
            guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme?.lowercased() ?? ""),
                let host = components.host, !host.isEmpty
            else {
                throw PostgresStorageError("the database URL must look like postgres://user:password@host:5432/database")
            }
            guard let user = components.user, !user.isEmpty else { throw PostgresStorageError("the database URL names no user") }
            let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
            let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
            var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
            if let rootCertificate = query["sslrootcert"], !rootCertificate.isEmpty {
                tlsConfiguration.trustRoots = .file(rootCertificate)
            }
            switch query["sslmode"] ?? "prefer" {
            case "disable": sslMode = .disable
            case "prefer": sslMode = .prefer
            case "require", "verify-full": sslMode = .require
            default: throw PostgresStorageError("sslmode must be disable, prefer, require or verify-full")
            }
            self.host = host
            port = components.port ?? 5432
            self.user = user.removingPercentEncoding ?? user
            password = components.password.map { $0.removingPercentEncoding ?? $0 }
            self.database = database.isEmpty ? nil : database
            self.tlsConfiguration = tlsConfiguration
        }
    }
}
