/* A growing byte buffer and a strict UTF-8 check, for the C readers of push bodies
 * (_pushcolumns.c, _pushproto.c). Included after Python.h. */
#ifndef LOGSTORE_PUSHBUF_H
#define LOGSTORE_PUSHBUF_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FAILED -2 /* out of memory: a Python exception is set */

typedef struct {
    char *p;
    size_t n, cap;
} Grow;

static inline int reserve(Grow *g, size_t more) {
    if (g->n + more <= g->cap) return 0;
    size_t cap = g->cap ? g->cap : 4096;
    while (cap < g->n + more) cap *= 2;
    char *p = realloc(g->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return BUF_FAILED;
    }
    g->p = p;
    g->cap = cap;
    return 0;
}

static inline int put(Grow *g, const void *data, size_t n) {
    if (reserve(g, n) < 0) return BUF_FAILED;
    memcpy(g->p + g->n, data, n);
    g->n += n;
    return 0;
}

static inline PyObject *bytes_of(const Grow *g) {
    return PyBytes_FromStringAndSize(g->p ? g->p : "", (Py_ssize_t)g->n);
}

/* a stream's lines as one buffer, their ends (uint32) and timestamps (int64) */
typedef struct {
    Grow text, ts, ends;
    int ascii;
} Cols;

static inline void cols_reset(Cols *c) {
    c->text.n = c->ts.n = c->ends.n = 0;
    c->ascii = 1;
}

static inline void cols_free(Cols *c) {
    free(c->text.p);
    free(c->ts.p);
    free(c->ends.p);
}

/* the line just appended to c->text ends here, at timestamp ts: 1; 0 when the lines pass
 * 4 GiB (ends are uint32); BUF_FAILED out of memory */
static inline int cols_end(Cols *c, long long ts) {
    if (c->text.n > 0xFFFFFFFFu) return 0;
    uint32_t end = (uint32_t)c->text.n;
    if (put(&c->ts, &ts, 8) < 0 || put(&c->ends, &end, 4) < 0) return BUF_FAILED;
    return 1;
}

/* services/ingest/columns.py's tuple of a stream: (labels, timestamps, lines, ends, ascii,
 * oldest, newest, longest line) */
static inline PyObject *cols_item(PyObject *labels, const Cols *c) {
    Py_ssize_t n = (Py_ssize_t)(c->ts.n / 8);
    const long long *ts = (const long long *)c->ts.p;
    const uint32_t *ends = (const uint32_t *)c->ends.p;
    long long lo = 0, hi = 0;
    uint32_t longest = 0, start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || ts[i] < lo) lo = ts[i];
        if (i == 0 || ts[i] > hi) hi = ts[i];
        if (ends[i] - start > longest) longest = ends[i] - start;
        start = ends[i];
    }
    return Py_BuildValue("(ONNNOLLk)", labels, bytes_of(&c->ts), bytes_of(&c->text),
                         bytes_of(&c->ends), c->ascii ? Py_True : Py_False, lo, hi,
                         (unsigned long)longest);
}

/* the length of the valid UTF-8 sequence at s (strict: no overlong form, no surrogate, at
 * most U+10FFFF, as Python's decoder), 0 when there is none */
static inline int utf8_seq(const unsigned char *s, const unsigned char *end) {
    unsigned char c = s[0];
    Py_ssize_t left = end - s;
    if (c >= 0xC2 && c <= 0xDF)
        return left >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* a surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
            (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0;
        if (c == 0xF4 && s[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

/* every byte of s[0:n] is valid UTF-8 (strict); *ascii cleared when one is not ASCII */
static inline int utf8_valid(const unsigned char *s, size_t n, int *ascii) {
    const unsigned char *end = s + n;
    while (s < end) {
        if (*s < 0x80) {
            s++;
            continue;
        }
        int k = utf8_seq(s, end);
        if (!k) return 0;
        *ascii = 0;
        s += k;
    }
    return 1;
}

#endif
