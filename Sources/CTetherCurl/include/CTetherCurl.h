#ifndef CTETHERCURL_H
#define CTETHERCURL_H
// libcurl (Debian's libcurl4-openssl-dev: OpenSSL TLS, nghttp2 HTTP/2) for Swift: curl's option
// setters are variadic and its callbacks take C function pointers, so these few wrappers and the
// two callbacks (a bounded response buffer, an extra trust root) live here; everything else is
// driven from Swift.
#include <curl/curl.h>
#include <stddef.h>

CURLcode tether_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode tether_curl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value);
CURLcode tether_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode tether_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLMcode tether_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
/// The transfer a finished message is about, and its result (CURLMsg's union, for Swift).
CURL *tether_curl_message_handle(CURLMsg *message);
CURLcode tether_curl_message_result(CURLMsg *message);
int tether_curl_message_is_done(CURLMsg *message);

/// A response body kept in memory up to `limit` bytes; beyond it the transfer fails
/// (CURLE_WRITE_ERROR) instead of growing without bound.
typedef struct {
    char *data;
    size_t length;
    size_t capacity;
    size_t limit;
    int overflowed;
} tether_curl_buffer;

/// Points the handle's write callback at `buffer` (which must outlive the transfer).
CURLcode tether_curl_use_buffer(CURL *handle, tether_curl_buffer *buffer);
void tether_curl_buffer_reset(tether_curl_buffer *buffer);
void tether_curl_buffer_free(tether_curl_buffer *buffer);

/// Extra trust roots, loaded once from a PEM file and added to every TLS context the handles
/// they are given to make: trusted in addition to the default roots, never instead of them.
typedef struct tether_curl_roots tether_curl_roots;
/// NULL with a message in `error` when the file holds no readable certificate.
tether_curl_roots *tether_curl_roots_load(const char *path, char *error, size_t error_size);
void tether_curl_roots_free(tether_curl_roots *roots);
CURLcode tether_curl_use_roots(CURL *handle, tether_curl_roots *roots);

#endif
