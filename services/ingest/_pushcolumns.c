/* A JSON push body read into columns, and a stream's columns made into a pack, in C (issue
 * 25): the common push (Loki's JSON, every entry `[timestamp, line]`) without a Python object
 * per line. `json_push` (here) reads the body into one buffer of line bytes per stream with
 * their timestamps and ends; `pack` (packcolumns.c) gives a stream's lines their levels,
 * content hashes, rollup tallies and the pack's columns (storage/blocks/packs.py
 * encode_columns) in one pass.
 *
 * Both answer exactly as the Python code (decode.py, prepare.py, packs.py) or None for what
 * they do not take: a body msgspec might read another way (an escaped field name, a lone
 * surrogate, invalid UTF-8, a null, metadata, an unknown field, a timestamp that is not
 * plain digits) and a stream whose levels the Python code decides (a non-ASCII line, a JSON
 * line the C parser leaves to msgspec). tests/ingest/test_pushcolumns.py holds both to one
 * answer. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "packcolumns.h"
#include "pushbuf.h"

#define NOT_PLAIN -1 /* the body or stream is left to the Python code */
#define FAILED -2    /* a Python exception is set */

/* -- the body ----------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
    long long ts_min, ts_max;
    Cols cols; /* the stream being read */
    Grow scratch;
} Scan;

static void ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int expect(Scan *s, unsigned char c) {
    ws(s);
    if (s->p >= s->end || *s->p != c) return NOT_PLAIN;
    s->p++;
    ws(s);
    return 0;
}

static int hex4(const unsigned char *s, const unsigned char *end, unsigned *out) {
    if (end - s < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* the string at s->p (its quote) unescaped into `out`; *ascii cleared by a non-ASCII one */
static int string(Scan *s, Grow *out, int *ascii) {
    if (s->p >= s->end || *s->p != '"') return NOT_PLAIN;
    const unsigned char *p = s->p + 1, *end = s->end;
    for (;;) {
        const unsigned char *run = p;
        unsigned char high = 0;
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) high |= *p++;
        if (p >= end || *p < 0x20) return NOT_PLAIN;
        if (high & 0x80) {
            for (const unsigned char *q = run; q < p;) {
                if (*q < 0x80) {
                    q++;
                    continue;
                }
                int k = utf8_seq(q, p);
                if (!k) return NOT_PLAIN;
                q += k;
            }
            *ascii = 0;
        }
        if (put(out, run, (size_t)(p - run)) < 0) return FAILED;
        if (*p == '"') {
            s->p = p + 1;
            return 0;
        }
        /* an escape */
        if (end - p < 2) return NOT_PLAIN;
        unsigned char e = p[1], c;
        unsigned cp;
        p += 2;
        switch (e) {
        case '"': c = '"'; break;
        case '\\': c = '\\'; break;
        case '/': c = '/'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u':
            if (!hex4(p, end, &cp)) return NOT_PLAIN;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return NOT_PLAIN; /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned low;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &low) ||
                    low < 0xDC00 || low > 0xDFFF)
                    return NOT_PLAIN;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            unsigned char u[4];
            size_t k;
            if (cp < 0x80) {
                u[0] = (unsigned char)cp;
                k = 1;
            } else if (cp < 0x800) {
                u[0] = (unsigned char)(0xC0 | (cp >> 6));
                u[1] = (unsigned char)(0x80 | (cp & 0x3F));
                k = 2;
            } else if (cp < 0x10000) {
                u[0] = (unsigned char)(0xE0 | (cp >> 12));
                u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                u[2] = (unsigned char)(0x80 | (cp & 0x3F));
                k = 3;
            } else {
                u[0] = (unsigned char)(0xF0 | (cp >> 18));
                u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                u[3] = (unsigned char)(0x80 | (cp & 0x3F));
                k = 4;
            }
            if (cp >= 0x80) *ascii = 0;
            if (put(out, u, k) < 0) return FAILED;
            continue;
        default: return NOT_PLAIN;
        }
        if (put(out, &c, 1) < 0) return FAILED;
    }
}

/* a key without escapes equal to `word` */
static int key_is(Scan *s, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n + 2 || s->p[0] != '"' || s->p[n + 1] != '"' ||
        memcmp(s->p + 1, word, n) != 0)
        return 0;
    s->p += n + 2;
    return 1;
}

/* a str of the string at s->p, or NULL: *rc says why (NOT_PLAIN, FAILED) */
static PyObject *text_of(Scan *s, int *rc) {
    int ascii = 1;
    s->scratch.n = 0;
    *rc = string(s, &s->scratch, &ascii);
    if (*rc < 0) return NULL;
    PyObject *t = PyUnicode_DecodeUTF8(s->scratch.p ? s->scratch.p : "", (Py_ssize_t)s->scratch.n,
                                       NULL);
    if (t == NULL) *rc = FAILED; /* the bytes were checked: only memory runs out here */
    return t;
}

/* "stream": {"name": "value", ...} as pairs in order (a repeated name too: the caller's
 * dict keeps the last, as msgspec's) */
static int labels(Scan *s, PyObject *pairs) {
    int rc;
    if ((rc = expect(s, '{')) < 0) return rc;
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 0;
    }
    for (;;) {
        PyObject *name = text_of(s, &rc), *value = NULL, *pair;
        if (name == NULL) return rc;
        if ((rc = expect(s, ':')) < 0 || (value = text_of(s, &rc)) == NULL) {
            Py_DECREF(name);
            return rc;
        }
        pair = PyTuple_Pack(2, name, value);
        Py_DECREF(name);
        Py_DECREF(value);
        if (pair == NULL) return FAILED;
        rc = PyList_Append(pairs, pair);
        Py_DECREF(pair);
        if (rc < 0) return FAILED;
        ws(s);
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return 0;
        }
        if ((rc = expect(s, ',')) < 0) return rc;
    }
}

/* a timestamp: a string of 1 to 19 plain digits within [ts_min, ts_max] */
static int timestamp(Scan *s, long long *out) {
    const unsigned char *p = s->p;
    if (p >= s->end || *p != '"') return NOT_PLAIN;
    p++;
    unsigned long long v = 0;
    int digits = 0;
    while (p < s->end && *p >= '0' && *p <= '9' && digits < 20) {
        v = v * 10 + (unsigned long long)(*p++ - '0');
        digits++;
    }
    if (p >= s->end || *p != '"' || digits == 0 || digits > 19 || v > (unsigned long long)LLONG_MAX)
        return NOT_PLAIN;
    if ((long long)v < s->ts_min || (long long)v > s->ts_max) return NOT_PLAIN;
    s->p = p + 1;
    *out = (long long)v;
    return 0;
}

/* "values": [[timestamp, line], ...] into the stream's columns */
static int values(Scan *s) {
    int rc;
    if ((rc = expect(s, '[')) < 0) return rc;
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 0;
    }
    for (;;) {
        long long ts;
        if ((rc = expect(s, '[')) < 0 || (rc = timestamp(s, &ts)) < 0 ||
            (rc = expect(s, ',')) < 0 || (rc = string(s, &s->cols.text, &s->cols.ascii)) < 0)
            return rc;
        if ((rc = cols_end(&s->cols, ts)) <= 0) return rc < 0 ? FAILED : NOT_PLAIN;
        ws(s);
        if (s->p >= s->end || *s->p != ']') return NOT_PLAIN; /* metadata, or more */
        s->p++;
        ws(s);
        if (s->p < s->end && *s->p == ']') {
            s->p++;
            return 0;
        }
        if ((rc = expect(s, ',')) < 0) return rc;
    }
}

/* one stream object, appended to `out` as (pairs, ts, text, ends, ascii, min_ts, max_ts,
 * longest line) */
static int stream(Scan *s, PyObject *out) {
    int rc, seen_labels = 0, seen_values = 0;
    PyObject *pairs = PyList_New(0);
    if (pairs == NULL) return FAILED;
    cols_reset(&s->cols);
    if ((rc = expect(s, '{')) < 0) goto done;
    if (s->p < s->end && *s->p == '}') {
        s->p++;
    } else {
        for (;;) {
            if (!seen_labels && key_is(s, "stream")) {
                seen_labels = 1;
                if ((rc = expect(s, ':')) < 0 || (rc = labels(s, pairs)) < 0) goto done;
            } else if (!seen_values && key_is(s, "values")) {
                seen_values = 1;
                if ((rc = expect(s, ':')) < 0 || (rc = values(s)) < 0) goto done;
            } else {
                rc = NOT_PLAIN;
                goto done;
            }
            ws(s);
            if (s->p < s->end && *s->p == '}') {
                s->p++;
                break;
            }
            if ((rc = expect(s, ',')) < 0) goto done;
        }
    }
    PyObject *item = cols_item(pairs, &s->cols);
    if (item == NULL) {
        rc = FAILED;
        goto done;
    }
    rc = PyList_Append(out, item) < 0 ? FAILED : 0;
    Py_DECREF(item);
done:
    Py_DECREF(pairs);
    return rc;
}

static int push(Scan *s, PyObject *out) {
    int rc;
    if ((rc = expect(s, '{')) < 0) return rc;
    if (!key_is(s, "streams")) return NOT_PLAIN;
    if ((rc = expect(s, ':')) < 0 || (rc = expect(s, '[')) < 0) return rc;
    if (s->p < s->end && *s->p == ']') {
        s->p++;
    } else {
        for (;;) {
            if ((rc = stream(s, out)) < 0) return rc;
            ws(s);
            if (s->p < s->end && *s->p == ']') {
                s->p++;
                break;
            }
            if ((rc = expect(s, ',')) < 0) return rc;
        }
    }
    if ((rc = expect(s, '}')) < 0) return rc;
    return s->p == s->end ? 0 : NOT_PLAIN;
}

PyDoc_STRVAR(json_push_doc,
"json_push(body, ts_min, ts_max) -> list | None\n\n"
"A Loki JSON push body whose every entry is [timestamp, line] (the timestamp plain digits\n"
"within [ts_min, ts_max]) as one tuple per stream: (label pairs in the order sent,\n"
"timestamps as int64, the lines' UTF-8 bytes joined, each line's end in them as uint32,\n"
"whether every line is ASCII, the oldest and newest timestamp, the longest line's bytes).\n"
"None for any other body: decode.py reads it, and says what is wrong with it.");

static PyObject *json_push(PyObject *self, PyObject *args) {
    Py_buffer body;
    Scan s;
    memset(&s, 0, sizeof s);
    if (!PyArg_ParseTuple(args, "y*LL", &body, &s.ts_min, &s.ts_max)) return NULL;
    s.p = body.buf;
    s.end = s.p + body.len;
    PyObject *out = PyList_New(0);
    int rc = out == NULL ? FAILED : push(&s, out);
    PyBuffer_Release(&body);
    cols_free(&s.cols);
    free(s.scratch.p);
    if (rc == 0) return out;
    Py_XDECREF(out);
    if (rc == FAILED) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"json_push", json_push, METH_VARARGS, json_push_doc},
    {"pack", pack_columns, METH_VARARGS, pack_columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pushcolumns",
    "A JSON push read into columns, a stream's columns into a pack; Python is the fallback.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pushcolumns(void) {
    pack_columns_init();
    return PyModule_Create(&module);
}
