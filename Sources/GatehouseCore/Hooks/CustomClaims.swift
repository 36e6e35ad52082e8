import Foundation

/// An account's custom claims (set by a hook's `customClaims` or `PUT /v1/users/{uid}/claims`)
/// or a sign-in's session claims: a JSON object whose members become top-level claims of the
/// gateway's ID tokens, as Firebase puts custom claims into its ID tokens.
public struct CustomClaims: Sendable, Equatable {
    /// The members.
    public private(set) var members: [String: JSONValue]

    /// The largest serialized object (Firebase's limit).
    public static let maximumBytes = 1000
    /// The deepest nesting of objects and arrays inside a value.
    public static let maximumDepth = 8

    /// Names no custom claim may have: the registered JWT claims (RFC 7519), the OpenID Connect
    /// ID token's and standard claims (Core §2, §5.1), the names of its aggregated and
    /// distributed claims (§5.6.2: `_claim_names`, `_claim_sources`, whose sources a relying party
    /// may fetch claims from and trust as the issuer's), OpenID Connect for Identity Assurance's
    /// `verified_claims` and RFC 9396's `authorization_details` (a verified identity, a grant),
    /// RFC 8693's delegation and scope claims,
    /// every claim the gateway mints itself (names beginning with `gatehouse` are refused as
    /// well), and the names Firebase's ID tokens and SDKs give the issuer's word (`firebase`,
    /// `user_id`, and `uid`, which its Admin SDK sets from `sub`): code ported from Firebase reads
    /// them. A relying party may trust any of them as the issuer's statement about the user.
    /// `roles`, `groups` and `entitlements` (RFC 9068) stay the app's: they are what custom
    /// claims are for.
    public static let reservedNames: Set<String> = [
        "iss", "sub", "aud", "exp", "iat", "nbf", "jti", "auth_time", "nonce", "acr", "amr", "azp", "at_hash", "c_hash", "sid", "cnf",
        "email", "email_verified", "name", "picture", "identities", "sign_in_provider",
        "given_name", "family_name", "middle_name", "nickname", "preferred_username", "profile", "website", "gender", "birthdate",
        "zoneinfo", "locale", "phone_number", "phone_number_verified", "address", "updated_at", "_claim_names", "_claim_sources", "act",
        "may_act", "scope", "client_id", "firebase", "user_id", "uid", "verified_claims", "authorization_details",
    ]

    /// The largest integer a JSON number is sure to keep (2^53 - 1, JavaScript's
    /// `Number.MAX_SAFE_INTEGER`): numbers are read as doubles here and by most consumers of a
    /// token, and 2^53 + 1 reads as 2^53, so 2^53 itself may stand for another number.
    public static let largestExactInteger = 9_007_199_254_740_991.0

    /// No claims.
    public static let empty = CustomClaims(checked: [:])

    private init(checked members: [String: JSONValue]) {
        self.members = members
    }

    /// Checks `members`: no reserved name, nesting at most 8 levels, at most 1,000 bytes
    /// serialized. Throws `invalid-argument` naming the first offending claim; `source` names
    /// where they came from in the message (`customClaims`, the body). A member exactly as
    /// `unchangedFrom` holds it (the claims stored on the account, which may predate a rule:
    /// a name reserved since, a number or a nesting refused since) is kept without the name and
    /// value checks, so that what was sent to be echoed back can be; it still counts in the size.
    public init(_ members: [String: JSONValue], source: String = "claims", unchangedFrom stored: [String: JSONValue] = [:]) throws {
        for name in members.keys.sorted() where stored[name] == nil || stored[name] != members[name] {
            if Self.isReserved(name) {
                throw GatehouseError.invalidArgument(
                    "\(source): the claim \(name.truncated(toBytes: 64).debugDescription) is reserved (registered JWT/OIDC claims, the gateway's own claims, gatehouse…)."
                )
            }
            if name.isEmpty { throw GatehouseError.invalidArgument("\(source): a claim name is empty.") }
            if let value = members[name], Self.depth(of: value) > Self.maximumDepth {
                throw GatehouseError.invalidArgument(
                    "\(source): the claim \(name.truncated(toBytes: 64).debugDescription) nests deeper than \(Self.maximumDepth) levels.")
            }
            if let value = members[name], !Self.numbersAreExact(value) {
                throw GatehouseError.invalidArgument(
                    "\(source): the claim \(name.truncated(toBytes: 64).debugDescription) holds a number beyond ±(2^53 - 1), which would not be kept exactly; send it as a string."
                )
            }
        }
        let size = try JSONCoding.encoder().encode(members).count
        guard size <= Self.maximumBytes else {
            throw GatehouseError.invalidArgument("\(source): the claims take \(size) bytes serialized; at most \(Self.maximumBytes).")
        }
        self.members = members
    }

    /// Reads stored claims (checked when they were stored); `nil` or unreadable bytes are none.
    public init(stored: Data?) {
        guard let stored, let object = try? JSONCoding.decoder().decode([String: JSONValue].self, from: stored) else {
            self.members = [:]
            return
        }
        self.members = object
    }

    /// Whether there are none.
    public var isEmpty: Bool { members.isEmpty }

    /// The bytes to store: `nil` for none.
    public var stored: Data? {
        members.isEmpty ? nil : try? JSONCoding.encoder().encode(members)
    }

    /// `self` without the member `name`, nor any member that reads as `name` to a consumer
    /// comparing names without case (`readingAs(_:)`).
    public func removing(_ name: String) -> CustomClaims {
        let gone = [name] + readingAs(name)
        guard gone.contains(where: { members[$0] != nil }) else { return self }
        var kept = members
        for member in gone { kept[member] = nil }
        return CustomClaims(checked: kept)
    }

    /// The names of members other than `name` itself that a consumer comparing names without
    /// case reads as `name` (`ADMIN` for `admin`: Go's `encoding/json` matches struct fields
    /// so), folded as `isReserved` folds them.
    public func readingAs(_ name: String) -> [String] {
        Self.names(members.keys, readingAs: name)
    }

    /// `readingAs(_:)` over any claim names.
    public static func names(_ names: some Sequence<String>, readingAs name: String) -> [String] {
        let folded = asciiFolded(name)
        return names.filter { $0 != name && asciiFolded($0) == folded }.sorted()
    }

    /// `self` with `other`'s members added, `other` winning on a shared name; `nil` when the
    /// union would pass the size limit.
    public func merging(_ other: CustomClaims) -> CustomClaims? {
        let union = members.merging(other.members) { _, new in new }
        guard let size = try? JSONCoding.encoder().encode(union).count, size <= Self.maximumBytes else { return nil }
        return CustomClaims(checked: union)
    }

    /// Whether no custom claim may be named `name`. Compared without case: consumers that look
    /// claims up case-insensitively must not read `Sub` or `EMAIL` as the gateway's own, nor
    /// `ſub` (U+017F, whose upper case is `S`: Python's `casefold` and Java's
    /// `equalsIgnoreCase` take it for `sub`) or `ıss` (U+0131, upper case `I`: Java's
    /// `equalsIgnoreCase` takes it for `iss`). A path-shaped name is reserved when its first
    /// part (before a `.` or `[`) is: path getters (lodash's `_.get(claims,
    /// "firebase.sign_in_provider")`, or `firebase[sign_in_provider]`) read a member named so
    /// before they walk the path, as the issuer's nested claim.
    public static func isReserved(_ name: String) -> Bool {
        let folded = asciiFolded(name)
        let head = String(folded.prefix { $0 != "." && $0 != "[" })
        // The prefix as bytes: `hasPrefix` compares characters, and `gatehouse` followed by a
        // combining mark (`e` + U+0301 is one character) would not start with it.
        return reservedNames.contains(folded) || reservedNames.contains(head) || folded.utf8.starts(with: "gatehouse".utf8)
    }

    /// `name` lower-cased, each scalar that some case mapping takes to ASCII letters (its lower
    /// case, the lower case of its upper case, or that of its lower case's upper case, without
    /// the combining marks it brings: `İ` is `i` and U+0307, `ẞ` is `ss` through `ß` and `SS`, as
    /// Unicode's case folding has it) written as those letters.
    static func asciiFolded(_ name: String) -> String {
        var folded = ""
        folded.reserveCapacity(name.utf8.count)
        for scalar in name.unicodeScalars {
            if scalar.isASCII {
                folded.unicodeScalars.append((65...90).contains(scalar.value) ? Unicode.Scalar(UInt8(scalar.value + 32)) : scalar)
                continue
            }
            let lower = scalar.properties.lowercaseMapping
            let mappings = [lower, scalar.properties.uppercaseMapping.lowercased(), lower.uppercased().lowercased()]
            let ascii = mappings.lazy.map { $0.unicodeScalars.filter { $0.properties.generalCategory != .nonspacingMark } }
                .first { !$0.isEmpty && $0.allSatisfy(\.isASCII) }
            if let ascii {
                folded.unicodeScalars.append(contentsOf: ascii)
            } else {
                folded.unicodeScalars.append(contentsOf: scalar.properties.lowercaseMapping.unicodeScalars)
            }
        }
        return folded
    }

    /// Whether every number in `value` lies within ±(2^53 - 1) (a larger one may have lost
    /// digits: 123456789012345678 reads as 123456789012345680).
    static func numbersAreExact(_ value: JSONValue) -> Bool {
        switch value {
        case .number(let number): abs(number) <= largestExactInteger
        case .object(let object): object.values.allSatisfy(numbersAreExact)
        case .array(let array): array.allSatisfy(numbersAreExact)
        default: true
        }
    }

    /// `self` with `other`'s members added, `other` winning on a shared name, whatever the
    /// size: for a caller that checks the size of what it builds (`HookAllowance.tokenClaimsSize`).
    func overlaid(by other: CustomClaims) -> CustomClaims {
        CustomClaims(checked: members.merging(other.members) { _, new in new })
    }

    /// Levels of objects and arrays: a scalar is 0, `{"a":1}` is 1.
    static func depth(of value: JSONValue) -> Int {
        switch value {
        case .object(let object): 1 + (object.values.map(depth).max() ?? 0)
        case .array(let array): 1 + (array.map(depth).max() ?? 0)
        default: 0
        }
    }
}
