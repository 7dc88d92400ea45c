#include "runtime/utf8.h"

/* Length of the well-formed character at p (1..4), or 0. */
static size_t char_length(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (!len || len > n) return 0;
    /* The second byte's range excludes overlong forms, surrogates and code
     * points above U+10FFFF (the Unicode standard's table 3-7). */
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

size_t mj_utf8_valid_prefix(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    for (size_t len; i < n && (len = char_length(p + i, n - i)); i += len) {
    }
    return i;
}
