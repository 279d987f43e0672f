#include "CTetherCurl.h"
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CURLcode tether_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tether_curl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tether_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode tether_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLMcode tether_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

CURL *tether_curl_message_handle(CURLMsg *message) { return message->easy_handle; }
CURLcode tether_curl_message_result(CURLMsg *message) { return message->data.result; }
int tether_curl_message_is_done(CURLMsg *message) { return message->msg == CURLMSG_DONE; }

static size_t buffer_write(char *data, size_t size, size_t count, void *context) {
    tether_curl_buffer *buffer = context;
    size_t length = size * count;
    if (buffer->length + length > buffer->limit) {
        buffer->overflowed = 1;
        return 0;   // curl fails the transfer with CURLE_WRITE_ERROR
    }
    if (buffer->length + length > buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity : 256;
        while (capacity < buffer->length + length) capacity *= 2;
        if (capacity > buffer->limit) capacity = buffer->limit;
        char *grown = realloc(buffer->data, capacity);
        if (!grown) return 0;
        buffer->data = grown;
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->length, data, length);
    buffer->length += length;
    return length;
}

CURLcode tether_curl_use_buffer(CURL *handle, tether_curl_buffer *buffer) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, buffer_write);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(handle, CURLOPT_WRITEDATA, buffer);
}

void tether_curl_buffer_reset(tether_curl_buffer *buffer) {
    buffer->length = 0;
    buffer->overflowed = 0;
}

void tether_curl_buffer_free(tether_curl_buffer *buffer) {
    free(buffer->data);
    buffer->data = NULL;
    buffer->length = buffer->capacity = 0;
}

struct tether_curl_roots {
    STACK_OF(X509) *certificates;
};

tether_curl_roots *tether_curl_roots_load(const char *path, char *error, size_t error_size) {
    FILE *file = fopen(path, "r");
    if (!file) {
        snprintf(error, error_size, "cannot read %s", path);
        return NULL;
    }
    STACK_OF(X509) *certificates = sk_X509_new_null();
    X509 *certificate;
    while ((certificate = PEM_read_X509(file, NULL, NULL, NULL)) != NULL) sk_X509_push(certificates, certificate);
    fclose(file);
    ERR_clear_error();
    if (sk_X509_num(certificates) == 0) {
        sk_X509_free(certificates);
        snprintf(error, error_size, "%s holds no PEM certificate", path);
        return NULL;
    }
    tether_curl_roots *roots = malloc(sizeof *roots);
    roots->certificates = certificates;
    return roots;
}

void tether_curl_roots_free(tether_curl_roots *roots) {
    if (!roots) return;
    sk_X509_pop_free(roots->certificates, X509_free);
    free(roots);
}

static CURLcode add_roots(CURL *handle, void *ssl_context, void *context) {
    (void)handle;
    tether_curl_roots *roots = context;
    X509_STORE *store = SSL_CTX_get_cert_store((SSL_CTX *)ssl_context);
    for (int i = 0; i < sk_X509_num(roots->certificates); i++) {
        // Already present (a context reused by curl) is not an error.
        if (X509_STORE_add_cert(store, sk_X509_value(roots->certificates, i)) != 1) ERR_clear_error();
    }
    return CURLE_OK;
}

CURLcode tether_curl_use_roots(CURL *handle, tether_curl_roots *roots) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_SSL_CTX_FUNCTION, add_roots);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(handle, CURLOPT_SSL_CTX_DATA, roots);
}
