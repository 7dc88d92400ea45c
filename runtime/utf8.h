/* UTF-8 validation: JSON text must be UTF-8 (RFC 8259), and strings that reach
 * the CLI's JSON output (paths, messages) may not be. */
#ifndef MJ_UTF8_H
#define MJ_UTF8_H

#include <stddef.h>

/* Bytes at the start of s[0..n) that are well-formed UTF-8 (no overlong
 * forms, no surrogates, nothing above U+10FFFF), ending on a whole character. */
size_t mj_utf8_valid_prefix(const char *s, size_t n);

#endif
