import Testing

@testable import GatehouseCore

/// Issue #19: trusted proxies as CIDR ranges; the client is the right-most untrusted hop.
@Suite struct TrustedProxiesTests {
    @Test("ranges and single addresses, IPv4, IPv6 and IPv4-mapped; anything else is refused by name")
    func ranges() throws {
        let proxies = try TrustedProxies(parsing: ["10.0.0.0/8", "192.168.1.7", "fd00::/8", "172.16.0.0/12"])
        for inside in ["10.1.2.3", "10.255.255.255", "192.168.1.7", "fd12::1", "::ffff:10.9.9.9", "172.31.255.1"] {
            #expect(proxies.contains(inside), "\(inside)")
        }
        for outside in ["11.0.0.1", "192.168.1.8", "fe80::1", "172.32.0.1", "not an address", "", "10.0.0.1/8"] {
            #expect(!proxies.contains(outside), "\(outside)")
        }
        #expect(try TrustedProxies(parsing: ["0.0.0.0/0"]).contains("203.0.113.9"))
        for bad in ["10.0.0.0/33", "10.0.0.0/", "10.0.0/8", "example.com", "fd00::/129", "*"] {
            #expect(throws: TrustedProxies.InvalidEntry.self, "\(bad)") { try TrustedProxies(parsing: [bad]) }
        }
    }

    @Test("the client: the peer unless it is a trusted proxy; then the right-most X-Forwarded-For hop that is not one")
    func client() throws {
        let proxies = try TrustedProxies(parsing: ["10.0.0.0/8"])
        // An untrusted peer's header is ignored.
        #expect(proxies.client(peer: "203.0.113.5", forwardedFor: ["198.51.100.1"]) == "203.0.113.5")
        // A client's forged hops stay left of what the proxies appended.
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["1.2.3.4, 198.51.100.7, 10.0.0.9"]) == "198.51.100.7")
        // Several header lines are one list, in order.
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["1.2.3.4", "198.51.100.7,10.0.0.9"]) == "198.51.100.7")
        // Only proxies: the left-most; no header: the peer.
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["10.0.0.8, 10.0.0.9"]) == "10.0.0.8")
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: []) == "10.0.0.2")
        // The list is split on its bytes: a scalar that joins the comma into one character
        // (U+0600 before it) leaves the hops the proxy appended to the right of it.
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["1.2.3.4\u{600}, 198.51.100.7"]) == "198.51.100.7")
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["x\u{600},\u{301}, 198.51.100.7,10.0.0.9"]) == "198.51.100.7")
        // A hop that is not an address is not believed: the proxy that passed it on is the
        // client (its requests share one rate-limit key), whatever the hop says.
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: [String(repeating: "x", count: 500)]) == "10.0.0.2")
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["198.51.100.7 \u{600}"]) == "10.0.0.2")
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["2001:db8::1, 10.0.0.9"]) == "2001:db8::1")
        // Proxies that write the port too: the address without it (and without IPv6's brackets).
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["1.2.3.4, 198.51.100.7:4711"]) == "198.51.100.7")
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["[2001:db8::1]:4711, 10.0.0.9:80"]) == "2001:db8::1")
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["[2001:db8::2]"]) == "2001:db8::2")
        #expect(proxies.client(peer: "10.0.0.2", forwardedFor: ["198.51.100.7:http"]) == "10.0.0.2", "a port is digits")
    }

    @Test("per-client limits count an IPv4 address itself and an IPv6 address by its /64; an IPv4-mapped address is its IPv4 address")
    func networks() {
        #expect(TrustedProxies.network(of: "198.51.100.7") == "198.51.100.7")
        #expect(TrustedProxies.network(of: "::ffff:198.51.100.7") == "198.51.100.7")
        #expect(TrustedProxies.network(of: "2001:db8:7:1::1") == "2001:db8:7:1::/64")
        #expect(TrustedProxies.network(of: "2001:0DB8:0007:0001:ffff:1:2:3") == "2001:db8:7:1::/64")
        #expect(TrustedProxies.network(of: "2001:db8:7:2::1") == "2001:db8:7:2::/64")
        #expect(TrustedProxies.network(of: "::1") == "0:0:0:0::/64")
        // NAT64's well-known prefix carries an IPv4 client: each is its own.
        #expect(TrustedProxies.network(of: "64:ff9b::198.51.100.7") == "198.51.100.7")
        #expect(TrustedProxies.network(of: "64:ff9b::c633:6408") == "198.51.100.8")
        #expect(TrustedProxies.network(of: "64:ff9b:1::1") == "64:ff9b:1:0::/64")
        #expect(TrustedProxies.network(of: "unknown") == "unknown")
    }
}
