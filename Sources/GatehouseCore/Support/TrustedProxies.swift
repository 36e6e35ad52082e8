import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An address range in CIDR notation (`10.0.0.0/8`, `fd00::/8`), or one address.
public struct IPRange: Sendable, Hashable {
    private let network: [UInt8]
    private let prefixLength: Int

    /// Parses `address` or `address/prefix`; `nil` when it is neither.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard let first = parts.first, let bytes = Self.bytes(of: first) else { return nil }
        let length = parts.count == 2 ? Int(parts[1]) : bytes.count * 8
        guard let length, (0...bytes.count * 8).contains(length) else { return nil }
        network = bytes
        prefixLength = length
    }

    /// Whether `address` (text) lies in the range.
    public func contains(_ address: String) -> Bool {
        guard let bytes = Self.bytes(of: address), bytes.count == network.count else { return false }
        var remaining = prefixLength
        for (index, byte) in bytes.enumerated() where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xff << (8 - bits))
            guard byte & mask == network[index] & mask else { return false }
            remaining -= bits
        }
        return true
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address (an IPv4-mapped IPv6 address as IPv4).
    static func bytes(of address: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff { return Array(bytes[12...]) }
        return bytes
    }
}

/// Which peers are the deployment's own proxies, and so who the client is: the peer itself,
/// or — when the peer is a trusted proxy — the right-most `X-Forwarded-For` address that is
/// not one (everything left of it was written by whoever the client is, and is not believed).
public struct TrustedProxies: Sendable {
    private let ranges: [IPRange]

    /// No trusted proxy: the peer is always the client.
    public static let none = TrustedProxies(ranges: [])

    private init(ranges: [IPRange]) { self.ranges = ranges }

    /// Whether no proxy is trusted (every peer is the client).
    public var isEmpty: Bool { ranges.isEmpty }

    /// The ranges of `entries` (`10.0.0.0/8`, `127.0.0.1`); throws naming the first entry that
    /// is neither an address nor a range.
    public init(parsing entries: [String]) throws(InvalidEntry) {
        var ranges: [IPRange] = []
        for entry in entries {
            guard let range = IPRange(entry) else { throw InvalidEntry(entry: entry) }
            ranges.append(range)
        }
        self.ranges = ranges
    }

    /// An entry that is neither an address nor a CIDR range.
    public struct InvalidEntry: Error {
        /// The entry as configured.
        public let entry: String
    }

    /// Whether `address` is one of the trusted proxies.
    public func contains(_ address: String) -> Bool {
        ranges.contains { $0.contains(address) }
    }

    /// The client of a request from `peer` carrying these `X-Forwarded-For` values (each a
    /// comma-separated list, in the order received), as an address: a rate-limit key and what
    /// logs, session uses and hooks are told.
    ///
    /// The lists are split on their bytes, not on characters: U+0600 before a comma makes one
    /// `Character` of the two, which would glue the client's own text to the hop the proxy
    /// appended. A right-most untrusted hop that is not an address is not believed either (a
    /// proxy writes addresses): the peer, the proxy that passed it on, is the client then.
    public func client(peer: String, forwardedFor: [String]) -> String {
        guard contains(peer) else { return peer }
        let hops = forwardedFor.flatMap { Self.hops(of: $0) }
        guard let client = hops.last(where: { !contains($0) }) ?? hops.first else { return peer }
        return IPRange.bytes(of: client) == nil ? peer : client
    }

    /// The network per-client limits count `client` (an address) under: an IPv4 address is
    /// itself, an IPv6 address its /64 (`2001:db8:7:1::/64`), the least a host or a subscriber
    /// is given (RFC 6177): whoever has one has all its addresses, and temporary addresses
    /// (RFC 8981) change within it, so counting addresses would give each request a new budget.
    /// An IPv4-mapped address is its IPv4 address, and so is one of NAT64's well-known prefix
    /// (`64:ff9b::/96`, RFC 6052), which carries each IPv4 client of a translator in its last
    /// four bytes; what is no address stays as it is.
    public static func network(of client: String) -> String {
        guard var bytes = IPRange.bytes(of: client) else { return client }
        if bytes.count == 16, bytes[0..<12].elementsEqual([0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]) { bytes = Array(bytes[12...]) }
        guard bytes.count == 16 else { return bytes.map(String.init).joined(separator: ".") }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// A hop as an address: proxies that write the client's port too (`203.0.113.5:4711`,
    /// `[2001:db8::1]:4711`, Azure's application gateway among them) lose it, and brackets
    /// around an IPv6 address go; anything else stays as it is.
    static func address(of hop: Substring) -> Substring {
        if hop.utf8.first == UInt8(ascii: "["), let close = hop.utf8.firstIndex(of: UInt8(ascii: "]")) {
            return hop[hop.utf8.index(after: hop.utf8.startIndex)..<close]
        }
        let colons = hop.utf8.indices.filter { hop.utf8[$0] == UInt8(ascii: ":") }
        if colons.count == 1, let colon = colons.first, hop[colon...].utf8.dropFirst().allSatisfy({ (0x30...0x39).contains($0) }) {
            return hop[..<colon]
        }
        return hop
    }

    /// The non-empty hops of one `X-Forwarded-For` value, split at its comma bytes and trimmed
    /// of spaces and tabs.
    static func hops(of value: String) -> [String] {
        value.utf8.split(separator: UInt8(ascii: ",")).compactMap { hop in
            let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            guard let start = hop.firstIndex(where: { !blank($0) }), let end = hop.lastIndex(where: { !blank($0) }) else { return nil }
            return String(address(of: Substring(hop[start...end])))
        }
    }
}
