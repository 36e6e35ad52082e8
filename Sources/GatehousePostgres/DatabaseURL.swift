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
        let tls: PostgresClient.Configuration.TLS
        switch query["sslmode"] ?? "prefer" {
        case "disable": tls = .disable
        case "prefer": tls = .prefer(tlsConfiguration)
        case "require", "verify-full": tls = .require(tlsConfiguration)
        default: throw PostgresStorageError("sslmode must be disable, prefer, require or verify-full")
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user.removingPercentEncoding ?? user,
            password: components.password.map { $0.removingPercentEncoding ?? $0 }, database: database.isEmpty ? nil : database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}
