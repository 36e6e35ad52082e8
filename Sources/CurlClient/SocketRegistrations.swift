import CCurl

#if canImport(Glibc)
    import Glibc
#endif

/// The driver's epoll registrations of libcurl's sockets, and the socket callbacks that keep
/// them (libcurl's socket, open-socket and close-socket callbacks, each given this object).
///
/// libcurl asks for a connection's socket to be forgotten (`CURL_POLL_REMOVE`) when its
/// transfer ends, and for it to be watched again when the next transfer takes the cached
/// connection: an `EPOLL_CTL_DEL` and an `EPOLL_CTL_ADD` per call, each allocating or freeing the
/// kernel's entry and its wait-queue hook (about 2 % of a 2 KB passthrough call's CPU in perf).
/// A connection socket whose interest was reading stays registered instead ("parked") until
/// libcurl watches it again, or until libcurl closes it, which drops it from the set. An event
/// on a parked socket (its server closed the idle connection) unregisters it: libcurl finds the
/// connection dead when it next checks it, as before.
///
/// Only sockets libcurl opened through `openSocket` are parked, and one is taken for registered
/// only while it is still the same socket: libcurl closes some of them without the close-socket
/// callback (a connection attempt abandoned while it connects), and the process may then give
/// the descriptor number to another socket libcurl watches (the threaded resolver's wake-up
/// pair). Its kernel identity (`SO_COOKIE`, never reused) is checked before a registration is
/// relied on, a `getsockopt` instead of two `epoll_ctl`. Used on the driver thread only, where
/// libcurl makes every callback.
final class SocketRegistrations {
    /// The driver's epoll set.
    let epoll: Int32
    /// Where each change to the set is counted.
    private let load: LoadCounters
    /// Connection sockets opened through `openSocket`, with their kernel identity.
    private var connections: [Int32: UInt64] = [:]
    /// The `CURL_POLL_*` interest each registered connection socket has in the set.
    private var registered: [Int32: Int32] = [:]
    /// Registered connection sockets libcurl does not watch now.
    private var parked: Set<Int32> = []

    /// Registrations in `epoll`, each change counted in `load`.
    init(epoll: Int32, load: LoadCounters) {
        self.epoll = epoll
        self.load = load
    }

    /// Changes the set (`gh_epoll_interest`), counting the change.
    private func change(_ socket: Int32, _ what: Int32, registered: Bool = false) -> Int32 {
        load.countWatchChange()
        return gh_epoll_interest(epoll, socket, what, registered ? 1 : 0)
    }

    /// Sets what libcurl wants to hear of `socket` (a `CURL_POLL_*` value).
    func watch(_ socket: Int32, _ what: Int32) {
        guard connections[socket] != nil else {
            // A failed removal means the socket is closed already; a failed registration
            // surfaces as the transfer's own timeout.
            _ = change(socket, what)
            return
        }
        let current = registered[socket]
        if what == CURL_POLL_REMOVE {
            // Parked only while reading, as a connection waiting for its next transfer is: a
            // socket registered for writing (still connecting, or sending) would report itself
            // writable at once, and one still connecting may be closed without the close-socket
            // callback, so it is forgotten.
            if current == CURL_POLL_IN {
                parked.insert(socket)
            } else {
                forget(socket)
                _ = change(socket, what)
            }
            return
        }
        parked.remove(socket)
        if current == what {
            if gh_socket_cookie(socket) == connections[socket] { return }
            // Another socket has the number now (the one recorded was closed without the
            // callback, and the kernel dropped its registration): registered afresh.
            forget(socket)
            _ = change(socket, what)
            return
        }
        registered[socket] = change(socket, what, registered: current != nil) == 0 ? what : nil
    }

    /// Whether an event on `socket` is for a parked socket, which is then unregistered; libcurl
    /// is not told of it (it does not watch the socket).
    func takeParked(_ socket: Int32) -> Bool {
        guard parked.remove(socket) != nil else { return false }
        registered[socket] = nil
        _ = change(socket, CURL_POLL_REMOVE)
        return true
    }

    /// No longer treats `socket` as a connection socket of its own.
    private func forget(_ socket: Int32) {
        connections[socket] = nil
        registered[socket] = nil
        parked.remove(socket)
    }

    /// Records a socket libcurl opened for a connection (the open-socket callbacks call it with
    /// the socket they made).
    ///
    /// A number that still has a registration libcurl watches belonged to a connection attempt
    /// libcurl abandoned with a plain `close` (happy eyeballs moving to its next address), and
    /// the close took the registration with it. libcurl keeps its own entry for the number and,
    /// when the next attempt's socket gets it and wants the same interest, makes no socket
    /// callback: the new socket is registered with that interest here, or nothing would watch
    /// it until one of libcurl's timers fired.
    func opened(_ socket: Int32) -> Int32 {
        guard socket >= 0 else { return socket }
        let watched = parked.contains(socket) ? nil : registered[socket]
        forget(socket)
        let cookie = gh_socket_cookie(socket)
        if cookie != 0 { connections[socket] = cookie }
        if let watched, change(socket, watched) == 0, cookie != 0 { registered[socket] = watched }
        return socket
    }

    /// Forgets a socket libcurl closes and closes it, unregistering it first: a registration
    /// goes with the socket only when no other descriptor (a child process's copy) holds it.
    private func closing(_ socket: Int32) -> Int32 {
        if registered[socket] != nil { _ = change(socket, CURL_POLL_REMOVE) }
        forget(socket)
        return close(socket)
    }

    /// CURLMOPT_SOCKETFUNCTION, its data this object.
    static let socketFunction: curl_socket_callback = { _, socket, what, registrations, _ in
        guard let registrations else { return -1 }
        Unmanaged<SocketRegistrations>.fromOpaque(registrations).takeUnretainedValue().watch(socket, what)
        return 0
    }

    /// CURLOPT_OPENSOCKETFUNCTION of requests to any address, its data this object: a
    /// close-on-exec socket of the kind libcurl asks for.
    static let openSocket: curl_opensocket_callback = { registrations, _, address in
        guard let registrations, let address else { return CURL_SOCKET_BAD }
        let candidate = address.pointee
        return Unmanaged<SocketRegistrations>.fromOpaque(registrations).takeUnretainedValue()
            .opened(gh_socket_cloexec(candidate.family, candidate.socktype, candidate.protocol))
    }

    /// CURLOPT_OPENSOCKETFUNCTION of `.publicOnly` requests: a socket only for a public
    /// address (`AddressPolicy.allows`), otherwise `CURL_SOCKET_BAD`, which fails the attempt.
    static let openPublicSocket: curl_opensocket_callback = { registrations, purpose, address in
        guard let address, AddressPolicy.allows(address) else { return CURL_SOCKET_BAD }
        return openSocket(registrations, purpose, address)
    }

    /// CURLOPT_CLOSESOCKETFUNCTION, its data this object.
    static let closeSocket: curl_closesocket_callback = { registrations, socket in
        guard let registrations else { return close(socket) }
        return Unmanaged<SocketRegistrations>.fromOpaque(registrations).takeUnretainedValue().closing(socket)
    }
}
