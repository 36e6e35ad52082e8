import CCurl
import Glibc
import Testing

@testable import CurlClient

/// The driver's registrations of libcurl's sockets, driven through libcurl's callbacks as
/// libcurl calls them, against a real epoll set.
@Suite("Socket registrations")
struct SocketRegistrationsTests {
    /// A socket pair whose first end is moved to descriptor `number` (`dup2`, which closes what
    /// was there at once, as a closed and reused descriptor number would be), and its other end.
    static func pair(at number: Int32) throws -> Int32 {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        try #require(dup2(ends[0], number) == number)
        close(ends[0])
        return ends[1]
    }

    /// A fresh epoll set (the caller closes it).
    static func epollSet() throws -> Int32 {
        let epoll = gh_epoll_create()
        try #require(epoll >= 0)
        return epoll
    }

    /// A TCP socket made by the open-socket callback of `registrations`, as libcurl has one made
    /// for a connection.
    static func openConnectionSocket(_ registrations: SocketRegistrations) throws -> Int32 {
        var address = curl_sockaddr()
        address.family = AF_INET
        address.socktype = Int32(SOCK_STREAM.rawValue)
        let number = SocketRegistrations.openSocket(Unmanaged.passUnretained(registrations).toOpaque(), CURLSOCKTYPE_IPCXN, &address)
        try #require(number >= 0)
        return number
    }

    /// The descriptors `epoll` reports ready within 100 ms.
    static func ready(_ epoll: Int32) -> [Int32] {
        var descriptors = [Int32](repeating: 0, count: 64)
        var flags = [Int32](repeating: 0, count: 64)
        let count = gh_epoll_wait(epoll, &descriptors, &flags, 100)
        return Array(descriptors.prefix(Int(count)))
    }

    @Test(
        "a descriptor number libcurl's connection socket had, closed without the close callback and now another socket's, is registered when libcurl watches it"
    )
    func reusedNumberIsRegistered() throws {
        let epoll = try Self.epollSet()
        defer { close(epoll) }
        let registrations = SocketRegistrations(epoll: epoll, load: LoadCounters())
        let number = try Self.openConnectionSocket(registrations)
        defer { close(number) }
        registrations.watch(number, CURL_POLL_OUT)
        // libcurl drops a connection attempt with a plain close; the number goes to the
        // resolver's wake-up pair, which libcurl watches, forgets (it stays parked here), and
        // closes; the next pair gets the same number.
        let first = try Self.pair(at: number)
        defer { close(first) }
        registrations.watch(number, CURL_POLL_IN)
        registrations.watch(number, CURL_POLL_REMOVE)
        let second = try Self.pair(at: number)
        defer { close(second) }
        registrations.watch(number, CURL_POLL_IN)

        #expect(write(second, "x", 1) == 1)
        #expect(Self.ready(epoll) == [number])
    }

    @Test(
        "the next connection attempt's socket, given the number of one libcurl abandoned with a plain close, is watched with the interest libcurl keeps for the number"
    )
    func nextAttemptIsWatched() throws {
        let epoll = try Self.epollSet()
        defer { close(epoll) }
        let registrations = SocketRegistrations(epoll: epoll, load: LoadCounters())
        let number = try Self.openConnectionSocket(registrations)
        registrations.watch(number, CURL_POLL_OUT)
        // Happy eyeballs moves to the next address: libcurl closes the attempt's socket without
        // the close callback, the next attempt's socket (here a socket pair's end, writable at
        // once) gets the number, and libcurl, which watches the number for writing already,
        // makes no socket callback.
        let other = try Self.pair(at: number)
        defer {
            close(other)
            close(number)
        }
        #expect(registrations.opened(number) == number)
        #expect(Self.ready(epoll) == [number])
    }

    @Test("a connection socket libcurl watches again after its transfer is not registered again; its close takes it out of the set")
    func parkedConnectionSocket() throws {
        let epoll = try Self.epollSet()
        defer { close(epoll) }
        let load = LoadCounters()
        let registrations = SocketRegistrations(epoll: epoll, load: load)
        let number = try Self.openConnectionSocket(registrations)
        registrations.watch(number, CURL_POLL_IN)
        #expect(load.watchChangeCount == 1)
        for _ in 0..<3 {
            registrations.watch(number, CURL_POLL_REMOVE)
            registrations.watch(number, CURL_POLL_IN)
        }
        #expect(load.watchChangeCount == 1)
        registrations.watch(number, CURL_POLL_REMOVE)
        // Another descriptor for the same socket (a child process's copy) keeps it open after
        // libcurl's close: only an unregistration takes it out of the set, where the socket
        // (never connected, so hung up) would be reported at every wait.
        let copy = dup(number)
        try #require(copy >= 0)
        defer { close(copy) }
        #expect(SocketRegistrations.closeSocket(Unmanaged.passUnretained(registrations).toOpaque(), number) == 0)
        #expect(load.watchChangeCount == 2)
        #expect(Self.ready(epoll).isEmpty)
    }
}
