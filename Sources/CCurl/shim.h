// Typed, non-variadic wrappers for libcurl's variadic functions.
//
// Swift cannot call C variadic functions such as curl_easy_setopt, so each argument
// type libcurl accepts gets one inline wrapper here. The option constant still decides
// which type libcurl reads; the wrapper only makes the call expressible from Swift.
#ifndef GATEHOUSE_CCURL_SHIM_H
#define GATEHOUSE_CCURL_SHIM_H

#include <curl/curl.h>

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
