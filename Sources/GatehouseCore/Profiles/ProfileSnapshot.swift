import Foundation

/// The stored form of a provider profile (a link's snapshot, a pending credential's): JSON
/// with a `version`, written and read here only. Version 1 is the profile's own members;
/// rows written before versions existed carry none and are version 1.
///
/// A snapshot that cannot be read is an error the operator sees (logged with its row, the
/// request answers `internal`), never a silently missing provider or a re-authentication
/// the user cannot fix.
public enum ProfileSnapshot {
    /// The version this build writes; it reads every version up to this one.
    public static let currentVersion = 1

    /// The stored form of `profile`.
    public static func encode(_ profile: ProviderProfile) throws -> Data {
        try JSONCoding.encoder().encode(Versioned(version: currentVersion, profile: profile))
    }

    /// The profile stored for the identity `providerId`/`federatedId` (of account `uid`, when
    /// known); throws `CorruptProfileSnapshot` when it is not readable, was written by a newer
    /// version, or describes another identity.
    public static func decode(_ data: Data, uid: String?, providerId: String, federatedId: String) throws -> ProviderProfile {
        func corrupt(_ reason: String) -> CorruptProfileSnapshot {
            CorruptProfileSnapshot(uid: uid, providerId: providerId, reason: reason)
        }
        let stored: Versioned
        if let known = decoded.value(for: data) {
            stored = known
        } else {
            do {
                stored = try JSONCoding.decoder().decode(Versioned.self, from: data)
            } catch {
                throw corrupt("unreadable (\(Self.summary(of: error)))")
            }
            decoded.insert(stored, for: data)
        }
        guard stored.version <= currentVersion else {
            throw corrupt("version \(stored.version), written by a newer Gatehouse (this one reads up to \(currentVersion))")
        }
        guard stored.profile.providerId == providerId, stored.profile.federatedId == federatedId else {
            throw corrupt("it describes another identity than its row")
        }
        return stored.profile
    }

    /// Snapshots already decoded, by their exact bytes: every `/v1/me` reads the links'
    /// snapshots, and decoding them was a tenth of its CPU (perf, release build). Keyed by
    /// content, an entry can never be stale; the checks below still run on every read.
    private static let decoded = RecentValues<Data, Versioned>(capacity: 1024)

    /// A decoding error in a few words, without the stored values.
    private static func summary(of error: any Error) -> String {
        switch error as? DecodingError {
        case .dataCorrupted: "not JSON"
        case .keyNotFound(let key, _): "no \(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            "wrong type at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        default: "\(type(of: error))"
        }
    }

    /// The profile's members and the version, in one JSON object.
    private struct Versioned: Codable, Sendable {
        var version: Int
        var profile: ProviderProfile

        private enum CodingKeys: String, CodingKey { case version }

        init(version: Int, profile: ProviderProfile) {
            self.version = version
            self.profile = profile
        }

        init(from decoder: any Decoder) throws {
            version = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(Int.self, forKey: .version) ?? 1
            profile = try ProviderProfile(from: decoder)
        }

        func encode(to encoder: any Encoder) throws {
            try profile.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(version, forKey: .version)
        }
    }
}

/// A stored profile snapshot the gateway cannot use; its log line names the row.
public struct CorruptProfileSnapshot: Error, StoreFailureSummary, CustomStringConvertible {
    /// The account, when the row belongs to one (a pending credential's target otherwise).
    public let uid: String?
    /// The provider of the link.
    public let providerId: String
    /// What is wrong with it.
    public let reason: String

    /// `profile snapshot of github.com link of account …: …`.
    public var description: String {
        "profile snapshot of the \(providerId) link\(uid.map { " of account \($0)" } ?? ""): \(reason)"
    }

    /// The same, for the request's log line.
    public var storeFailureSummary: String { description }
}

extension ProviderLinkRecord {
    /// The stored profile, decoded and checked against this link's identity.
    public func profile() throws -> ProviderProfile {
        try ProfileSnapshot.decode(profileJSON, uid: uid, providerId: providerId, federatedId: federatedId)
    }
}

extension PendingCredentialRecord {
    /// The profile the credential would link, decoded and checked against its identity.
    public func profile() throws -> ProviderProfile {
        try ProfileSnapshot.decode(profileJSON, uid: targetUid, providerId: providerId, federatedId: federatedId)
    }
}
