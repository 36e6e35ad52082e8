import CCurl

#if canImport(Glibc)
    import Glibc
#endif

/// Where a request may connect: anywhere, or only to public internet addresses (for URLs
/// that users or providers choose, such as photo URLs: no server-side request forgery into
/// loopback, private, link-local, unique-local, CGNAT or multicast addresses).
public enum AddressPolicy: Sendable, Equatable {
    /// Any address (the configured provider endpoints).
    case any
    /// Public addresses only; a connection to anything else fails as `connectFailed`.
    case publicOnly

    /// Whether an IPv4 address (network byte order bytes) is on the public internet.
    static func isPublic(ipv4 bytes: [UInt8]) -> Bool {
        guard bytes.count == 4 else { return false }
        let (a, b) = (bytes[0], bytes[1])
        switch a {
        case 0, 10, 127: return false  // "this" network, private, loopback
        case 100 where b & 0xC0 == 64: return false  // 100.64/10 shared (CGNAT)
        case 169 where b == 254: return false  // link-local (cloud metadata services)
        case 172 where b & 0xF0 == 16: return false  // 172.16/12 private
        case 192 where b == 168: return false  // private
        case 192 where b == 0 && bytes[2] == 0: return false  // IETF protocol assignments
        case 198 where b & 0xFE == 18: return false  // benchmarking
        case 224...255: return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    /// Whether an IPv6 address is on the public internet. Addresses that carry an IPv4 address
    /// (IPv4-mapped, IPv4-compatible, NAT64's well-known prefix, 6to4) are judged by it.
    static func isPublic(ipv6 bytes: [UInt8]) -> Bool {
        guard bytes.count == 16 else { return false }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return isPublic(ipv4: Array(bytes[12..<16]))
        }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return false }  // :: and ::1
        if bytes[0..<12].allSatisfy({ $0 == 0 }) { return isPublic(ipv4: Array(bytes[12..<16])) }  // ::a.b.c.d
        if bytes[0] == 0xFF { return false }  // multicast
        if bytes[0] & 0xFE == 0xFC { return false }  // fc00::/7 unique local
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return false }  // fe80::/10 link-local
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0xC0 { return false }  // fec0::/10 site-local
        if bytes[0] == 0x00 && bytes[1] == 0x64 && bytes[2] == 0xFF && bytes[3] == 0x9B {
            // 64:ff9b:1::/48 is a network's own translator (RFC 8215): never public.
            if bytes[4] == 0x00 && bytes[5] == 0x01 { return false }
            return isPublic(ipv4: Array(bytes[12..<16]))  // 64:ff9b::/96 NAT64
        }
        if bytes[0] == 0x20 && bytes[1] == 0x02 { return isPublic(ipv4: Array(bytes[2..<6])) }  // 2002::/16 6to4
        return true
    }
}

extension AddressPolicy {
    /// Whether libcurl's resolved `address` (the argument of CURLOPT_OPENSOCKETFUNCTION) is a
    /// public IPv4 or IPv6 address; any other family is refused.
    static func allows(_ address: UnsafePointer<curl_sockaddr>) -> Bool {
        guard let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr) else { return false }
        let candidate = address.pointee
        // Read the address through the pointer: libcurl's storage behind `addr` is `addrlen`
        // bytes long, more than `struct sockaddr` for IPv6.
        let raw = UnsafeRawPointer(address).advanced(by: offset)
        switch Int32(candidate.family) {
        case AF_INET where Int(candidate.addrlen) >= MemoryLayout<sockaddr_in>.size:
            let ip = raw.loadUnaligned(as: sockaddr_in.self).sin_addr
            return withUnsafeBytes(of: ip) { isPublic(ipv4: Array($0)) }
        case AF_INET6 where Int(candidate.addrlen) >= MemoryLayout<sockaddr_in6>.size:
            let ip = raw.loadUnaligned(as: sockaddr_in6.self).sin6_addr
            return withUnsafeBytes(of: ip) { isPublic(ipv6: Array($0)) }
        default:
            return false
        }
    }
}
