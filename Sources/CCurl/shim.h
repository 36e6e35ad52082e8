// Typed, non-variadic wrappers for libcurl's variadic functions.
//
// Swift cannot call C variadic functions such as curl_easy_setopt, so each argument
// type libcurl accepts gets one inline wrapper here. The option constant still decides
// which type libcurl reads; the wrapper only makes the call expressible from Swift.
#ifndef GATEHOUSE_CCURL_SHIM_H
#define GATEHOUSE_CCURL_SHIM_H

#include <curl/curl.h>
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

/// curl_easy_setopt for options taking a `long`.
static inline CURLcode gh_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for options taking a `curl_off_t` (the `_LARGE` options).
static inline CURLcode gh_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for options taking a C string (libcurl copies it).
static inline CURLcode gh_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for options taking an opaque pointer (WRITEDATA, HEADERDATA, PRIVATE, POSTFIELDS).
static inline CURLcode gh_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt for options taking a header list.
static inline CURLcode gh_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/// The signature of CURLOPT_WRITEFUNCTION, CURLOPT_HEADERFUNCTION and CURLOPT_READFUNCTION
/// callbacks (libcurl's read callback has the same shape: a buffer to fill, its size).
typedef size_t (*gh_data_callback)(char *data, size_t size, size_t count, void *userdata);

/// curl_easy_setopt for CURLOPT_WRITEFUNCTION / CURLOPT_HEADERFUNCTION / CURLOPT_READFUNCTION.
static inline CURLcode gh_easy_setopt_data_callback(CURL *handle, CURLoption option, gh_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// curl_easy_setopt for CURLOPT_OPENSOCKETFUNCTION.
static inline CURLcode gh_easy_setopt_opensocket(CURL *handle, curl_opensocket_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback);
}

/// curl_easy_setopt for CURLOPT_CLOSESOCKETFUNCTION.
static inline CURLcode gh_easy_setopt_closesocket(CURL *handle, curl_closesocket_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, callback);
}

/// curl_easy_setopt for CURLOPT_PREREQFUNCTION (called before each request libcurl sends on
/// the handle, a retry's included).
static inline CURLcode gh_easy_setopt_prereq(CURL *handle, curl_prereq_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, callback);
}

/// curl_share_setopt for CURLSHOPT_SHARE / CURLSHOPT_UNSHARE (a `curl_lock_data`).
static inline CURLSHcode gh_share_setopt_lock_data(CURLSH *share, CURLSHoption option, curl_lock_data data) {
    return curl_share_setopt(share, option, data);
}

/// curl_easy_getinfo for infos answering a `long`.
static inline CURLcode gh_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// curl_easy_getinfo for infos answering a `curl_off_t`.
static inline CURLcode gh_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// curl_easy_getinfo for infos answering a pointer (CURLINFO_PRIVATE).
static inline CURLcode gh_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

/// curl_multi_setopt for options taking a `long`.
static inline CURLMcode gh_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

/// curl_multi_setopt for CURLMOPT_SOCKETFUNCTION.
static inline CURLMcode gh_multi_setopt_socketfunction(CURLM *handle, curl_socket_callback callback) {
    return curl_multi_setopt(handle, CURLMOPT_SOCKETFUNCTION, callback);
}

/// curl_multi_setopt for CURLMOPT_TIMERFUNCTION.
static inline CURLMcode gh_multi_setopt_timerfunction(CURLM *handle, curl_multi_timer_callback callback) {
    return curl_multi_setopt(handle, CURLMOPT_TIMERFUNCTION, callback);
}

/// curl_multi_setopt for options taking an opaque pointer (SOCKETDATA, TIMERDATA).
static inline CURLMcode gh_multi_setopt_pointer(CURLM *handle, CURLMoption option, void *value) {
    return curl_multi_setopt(handle, option, value);
}

// The driver's own event loop: libcurl's socket interface (curl_multi_socket_action) over an
// epoll set, so a wake-up costs what is ready rather than every transfer in flight. `struct
// epoll_event` is packed on x86-64, which Swift imports awkwardly: these helpers keep it in C.

/// A close-on-exec epoll set, or -1.
static inline int gh_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/// A non-blocking, close-on-exec eventfd (the driver's wake-up), or -1.
static inline int gh_eventfd_create(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

/// Wakes whoever waits on the eventfd (the counter saturating is as good as a wake-up).
static inline void gh_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t written = write(fd, &one, sizeof one);
    (void)written;
}

/// Resets the eventfd's counter after a wake-up.
static inline void gh_eventfd_drain(int fd) {
    uint64_t value;
    ssize_t bytes = read(fd, &value, sizeof value);
    (void)bytes;
}

/// Sets the interest of `fd` from a CURL_POLL_* value (CURL_POLL_REMOVE forgets it), changing
/// its registration first when `registered` says it has one, adding it first otherwise; either
/// falls back to the other when the set says otherwise. The data carried by each event is the
/// descriptor itself.
static inline int gh_epoll_interest(int epfd, int fd, int what, int registered) {
    if (what == CURL_POLL_REMOVE) {
        // libcurl may already have closed it (epoll forgot it then): nothing to undo.
        return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    }
    struct epoll_event event = {0};
    if (what & CURL_POLL_IN) event.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) event.events |= EPOLLOUT;
    event.data.fd = fd;
    if (epoll_ctl(epfd, registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) == 0) return 0;
    // libcurl changes the interest of a socket it registered before (and one socket may serve
    // several transfers in turn); a socket closed since is no longer in the set.
    if (errno == EEXIST) return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event);
    if (errno == ENOENT) return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
    return -1;
}

/// The kernel's identity of the socket `fd` refers to (SO_COOKIE: unique while the system runs,
/// never reused), or 0 when it is not a socket or has none.
static inline uint64_t gh_socket_cookie(int fd) {
    uint64_t cookie = 0;
    socklen_t length = sizeof cookie;
    return getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &length) == 0 ? cookie : 0;
}

/// A close-on-exec socket for libcurl's open-socket callback, or -1.
static inline int gh_socket_cloexec(int family, int type, int protocol) {
    return socket(family, type | SOCK_CLOEXEC, protocol);
}

/// `gh_epoll_interest` for a descriptor whose registration is not known.
static inline int gh_epoll_watch(int epfd, int fd, int what) { return gh_epoll_interest(epfd, fd, what, 0); }

/// Names the calling thread (`top -H`, `perf`; at most 15 characters kept).
static inline void gh_name_this_thread(const char *name) { prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

/// The most events one gh_epoll_wait reports (more stay ready for the next call).
#define GH_EPOLL_BATCH 64

/// Waits up to `timeout_ms` (-1: forever) and reports at most GH_EPOLL_BATCH ready descriptors
/// in `fds`, each with its CURL_CSELECT_* bits in `flags`. Answers their number, 0 on a timeout
/// or an interrupted wait.
static inline int gh_epoll_wait(int epfd, int *fds, int *flags, int timeout_ms) {
    struct epoll_event events[GH_EPOLL_BATCH];
    int count = epoll_wait(epfd, events, GH_EPOLL_BATCH, timeout_ms);
    if (count < 0) return 0;
    for (int i = 0; i < count; i++) {
        uint32_t ready = events[i].events;
        int bits = 0;
        // A hang-up is read to its end: libcurl learns of it by reading.
        if (ready & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) bits |= CURL_CSELECT_IN;
        if (ready & EPOLLOUT) bits |= CURL_CSELECT_OUT;
        if (ready & EPOLLERR) bits |= CURL_CSELECT_ERR;
        fds[i] = events[i].data.fd;
        flags[i] = bits;
    }
    return count;
}

/// The value a write callback returns to pause the transfer (a macro Swift cannot see).
static inline size_t gh_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }

/// The value a read callback returns to pause the upload until more bytes are produced.
static inline size_t gh_readfunc_pause(void) { return CURL_READFUNC_PAUSE; }

/// The value a read callback returns to abort the transfer (the body's producer failed).
static inline size_t gh_readfunc_abort(void) { return CURL_READFUNC_ABORT; }

/// The CURLPAUSE_CONT bitmask (a macro Swift cannot see).
static inline int gh_pause_cont(void) { return CURLPAUSE_CONT; }

/// Reads the fields of a CURLMsg, whose `data` member is a union Swift imports awkwardly.
static inline CURLcode gh_msg_result(CURLMsg *msg) { return msg->data.result; }

/// curl_global_init with CURL_GLOBAL_ALL (a macro expression Swift cannot see).
static inline CURLcode gh_global_init(void) { return curl_global_init(CURL_GLOBAL_ALL); }

#endif
