/* Loki's protobuf push body (logproto.PushRequest, proto/push.proto), read from its wire
 * format in one pass: what Promtail and Alloy send. Read through the generated classes,
 * each entry cost a dozen attribute lookups on its message objects in Python, 1.8 ms per
 * 1,000 realistic lines against 0.4 ms for the same lines as JSON (bench/REPORT.md).
 *
 * Only a body the generated classes would read the same way is read here: anything else
 * (a field sent twice where it would be merged, a wrong wire type, invalid UTF-8, a
 * timestamp out of range, the `parsed` pairs) answers None, and decode.py reads the body
 * the slow way, which also says what is wrong with it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "pushbuf.h"

typedef struct {
    const unsigned char *p, *end;
} Buf;

/* a base-128 varint; 0 when cut short or longer than ten bytes */
static int varint(Buf *b, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && b->p < b->end; shift += 7) {
        unsigned char c = *b->p++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* the next field's number and wire type; 0 when cut short or the number is not a valid
 * field number (0, or past 2^29 - 1): the generated classes call such a body corrupt */
static int next_key(Buf *b, int *field, int *wire) {
    uint64_t key;
    if (!varint(b, &key) || (key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF) return 0;
    *field = (int)(key >> 3);
    *wire = (int)(key & 7);
    return 1;
}

/* a length-delimited field's bytes as `sub`, `b` moved past them */
static int delimited(Buf *b, Buf *sub) {
    uint64_t n;
    if (!varint(b, &n) || n > (uint64_t)(b->end - b->p)) return 0;
    sub->p = b->p;
    sub->end = b->p + n;
    b->p += n;
    return 1;
}

/* past a field this reader does not use */
static int skip(Buf *b, int wire) {
    uint64_t v;
    Buf sub;
    switch (wire) {
    case 0: return varint(b, &v);
    case 1: if (b->end - b->p < 8) return 0; b->p += 8; return 1;
    case 2: return delimited(b, &sub);
    case 5: if (b->end - b->p < 4) return 0; b->p += 4; return 1;
    default: return 0; /* groups: the generated classes decide */
    }
}

/* the field's text; NULL with no exception set when it is not valid UTF-8 */
static PyObject *text(Buf *s) {
    PyObject *t = PyUnicode_DecodeUTF8((const char *)s->p, s->end - s->p, "strict");
    if (t == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return t;
}

/* outcome of a part: read, not for this reader (None), or a Python error */
enum { READ = 1, OTHER = 0, FAILED = -1 };


#define GIVE_UP(x) do { result = (x); goto done; } while (0)

/* google.protobuf.Timestamp: seconds (1), nanos (2); a repeated field's last value wins */
static int timestamp(Buf *b, long long *seconds, long long *nanos) {
    uint64_t v;
    while (b->p < b->end) {
        int field, wire;
        if (!next_key(b, &field, &wire)) return OTHER;
        if ((field == 1 || field == 2) && wire == 0) {
            if (!varint(b, &v)) return OTHER;
            if (field == 1) *seconds = (long long)(int64_t)v;
            else *nanos = (long long)(int32_t)(int64_t)v;
        } else if (field == 1 || field == 2 || !skip(b, wire)) {
            return OTHER;
        }
    }
    return READ;
}

/* a structuredMetadata pair: name (1), value (2), put into *md */
static int metadata_pair(Buf *b, PyObject **md) {
    PyObject *name = NULL, *value = NULL;
    int result = OTHER;
    Buf s;
    while (b->p < b->end) {
        int field, wire;
        if (!next_key(b, &field, &wire)) GIVE_UP(OTHER);
        if (field == 1 || field == 2) {
            PyObject **slot = field == 1 ? &name : &value;
            if (wire != 2 || *slot != NULL || !delimited(b, &s)) GIVE_UP(OTHER);
            if ((*slot = text(&s)) == NULL) GIVE_UP(PyErr_Occurred() ? FAILED : OTHER);
        } else if (!skip(b, wire)) {
            GIVE_UP(OTHER);
        }
    }
    if (name == NULL) name = PyUnicode_FromStringAndSize("", 0);
    if (value == NULL) value = PyUnicode_FromStringAndSize("", 0);
    if (name == NULL || value == NULL) GIVE_UP(FAILED);
    if (*md == NULL && (*md = PyDict_New()) == NULL) GIVE_UP(FAILED);
    result = PyDict_SetItem(*md, name, value) < 0 ? FAILED : READ;
done:
    Py_XDECREF(name);
    Py_XDECREF(value);
    return result;
}

/* one EntryAdapter as (timestamp ns, line, metadata dict or None), appended to `entries` */
static int entry(Buf *b, PyObject *entries, long long ts_min, long long ts_max) {
    long long seconds = 0, nanos = 0, ts;
    int stamped = 0, result = OTHER;
    PyObject *line = NULL, *md = NULL, *stamp = NULL, *tuple = NULL;
    Buf s;
    while (b->p < b->end) {
        int field, wire;
        if (!next_key(b, &field, &wire)) GIVE_UP(OTHER);
        if (field == 1) {
            /* a second timestamp would be merged into the first */
            if (wire != 2 || stamped++ || !delimited(b, &s)) GIVE_UP(OTHER);
            if (timestamp(&s, &seconds, &nanos) != READ) GIVE_UP(OTHER);
        } else if (field == 2) {
            if (wire != 2 || line != NULL || !delimited(b, &s)) GIVE_UP(OTHER);
            if ((line = text(&s)) == NULL) GIVE_UP(PyErr_Occurred() ? FAILED : OTHER);
        } else if (field == 3) {
            if (wire != 2 || !delimited(b, &s)) GIVE_UP(OTHER);
            int r = metadata_pair(&s, &md);
            if (r != READ) GIVE_UP(r);
        } else if (field == 4 || !skip(b, wire)) {
            GIVE_UP(OTHER); /* `parsed` pairs: never sent by clients, left to the classes */
        }
    }
    if (__builtin_mul_overflow(seconds, 1000000000LL, &ts) ||
        __builtin_add_overflow(ts, nanos, &ts) || ts < ts_min || ts > ts_max)
        GIVE_UP(OTHER); /* decode.py says which timestamp and why */
    if (line == NULL && (line = PyUnicode_FromStringAndSize("", 0)) == NULL) GIVE_UP(FAILED);
    if ((stamp = PyLong_FromLongLong(ts)) == NULL) GIVE_UP(FAILED);
    if ((tuple = PyTuple_Pack(3, stamp, line, md != NULL ? md : Py_None)) == NULL)
        GIVE_UP(FAILED);
    result = PyList_Append(entries, tuple) < 0 ? FAILED : READ;
done:
    Py_XDECREF(line);
    Py_XDECREF(md);
    Py_XDECREF(stamp);
    Py_XDECREF(tuple);
    return result;
}

/* how a StreamAdapter's entries are read: each one's bytes to `one`, with `ctx` */
typedef int (*EntryReader)(Buf *entry, void *ctx);

/* a StreamAdapter's fields: the labels text into *labels (a new reference, "" when absent),
 * each entry to `one`; READ, OTHER or FAILED */
static int stream_fields(Buf *b, Py_ssize_t max_labels, EntryReader one, void *ctx,
                         PyObject **labels) {
    Buf s;
    *labels = NULL;
    while (b->p < b->end) {
        int field, wire, r;
        if (!next_key(b, &field, &wire)) return OTHER;
        if (field == 1) {
            if (wire != 2 || *labels != NULL || !delimited(b, &s)) return OTHER;
            if (s.end - s.p > max_labels) return OTHER; /* refused by decode.py */
            if ((*labels = text(&s)) == NULL) return PyErr_Occurred() ? FAILED : OTHER;
        } else if (field == 2) {
            if (wire != 2 || !delimited(b, &s)) return OTHER;
            if ((r = one(&s, ctx)) != READ) return r;
        } else if ((field == 3 && wire != 0) || !skip(b, wire)) {
            return OTHER;
        }
    }
    if (*labels == NULL && (*labels = PyUnicode_FromStringAndSize("", 0)) == NULL)
        return FAILED;
    return READ;
}

/* what the readers of entries are given: where they go and the timestamps' bounds */
typedef struct {
    PyObject *entries; /* stream(): a list of tuples */
    Cols *cols;        /* stream_columns() */
    long long ts_min, ts_max;
} Entries;

static int entry_tuple(Buf *b, void *ctx) {
    Entries *e = ctx;
    return entry(b, e->entries, e->ts_min, e->ts_max);
}

/* one StreamAdapter as (labels text, entries), appended to `out` */
static int stream(Buf *b, PyObject *out, long long ts_min, long long ts_max,
                  Py_ssize_t max_labels) {
    PyObject *labels = NULL, *pair = NULL;
    Entries e = {PyList_New(0), NULL, ts_min, ts_max};
    if (e.entries == NULL) return FAILED;
    int result = stream_fields(b, max_labels, entry_tuple, &e, &labels);
    if (result == READ) {
        pair = PyTuple_Pack(2, labels, e.entries);
        result = pair == NULL || PyList_Append(out, pair) < 0 ? FAILED : READ;
    }
    Py_XDECREF(labels);
    Py_DECREF(e.entries);
    Py_XDECREF(pair);
    return result;
}

PyDoc_STRVAR(streams_doc,
"streams(body, ts_min, ts_max, max_labels)\n\n"
"An inflated PushRequest as a list of (labels text, [(timestamp ns, line, metadata dict or\n"
"None), ...]) per stream, in body order; None when the generated classes must read it.");

/* -- columns (services/ingest/columns.py) --------------------------------------------------- */

/* one EntryAdapter without metadata into the columns; OTHER for any other entry */
static int entry_into(Buf *b, Cols *c, long long ts_min, long long ts_max) {
    long long seconds = 0, nanos = 0, ts;
    int stamped = 0, lined = 0;
    Buf s, line = {NULL, NULL};
    while (b->p < b->end) {
        int field, wire;
        if (!next_key(b, &field, &wire)) return OTHER;
        if (field == 1) {
            if (wire != 2 || stamped++ || !delimited(b, &s)) return OTHER;
            if (timestamp(&s, &seconds, &nanos) != READ) return OTHER;
        } else if (field == 2) {
            if (wire != 2 || lined++ || !delimited(b, &line)) return OTHER;
        } else if (field == 3 || field == 4 || !skip(b, wire)) {
            return OTHER; /* metadata: the entries' reader takes it */
        }
    }
    if (__builtin_mul_overflow(seconds, 1000000000LL, &ts) ||
        __builtin_add_overflow(ts, nanos, &ts) || ts < ts_min || ts > ts_max)
        return OTHER;
    size_t n = lined ? (size_t)(line.end - line.p) : 0;
    if (n && !utf8_valid(line.p, n, &c->ascii)) return OTHER;
    if (n && put(&c->text, line.p, n) < 0) return FAILED;
    int ended = cols_end(c, ts);
    return ended < 0 ? FAILED : ended ? READ : OTHER;
}

static int entry_column(Buf *b, void *ctx) {
    Entries *e = ctx;
    return entry_into(b, e->cols, e->ts_min, e->ts_max);
}

/* one StreamAdapter as columns.py's tuple, appended to `out` */
static int stream_columns(Buf *b, Cols *c, PyObject *out, long long ts_min, long long ts_max,
                          Py_ssize_t max_labels) {
    PyObject *labels = NULL, *item = NULL;
    Entries e = {NULL, c, ts_min, ts_max};
    cols_reset(c);
    int result = stream_fields(b, max_labels, entry_column, &e, &labels);
    if (result == READ) {
        item = cols_item(labels, c);
        result = item == NULL || PyList_Append(out, item) < 0 ? FAILED : READ;
    }
    Py_XDECREF(labels);
    Py_XDECREF(item);
    return result;
}

PyDoc_STRVAR(columns_doc,
"columns(body, ts_min, ts_max, max_labels)\n\n"
"An inflated PushRequest whose entries carry no metadata, as one tuple per stream: (labels\n"
"text, timestamps as int64, the lines' UTF-8 bytes joined, each line's end as uint32,\n"
"whether every line is ASCII, the oldest and newest timestamp, the longest line's bytes).\n"
"None for any other body: streams() or the generated classes read it.");

/* -- the request ----------------------------------------------------------------------------- */

/* a PushRequest's fields: each stream (field 1) given to `one`, `format` (field 2) checked;
 * READ, OTHER or FAILED */
typedef int (*StreamReader)(Buf *stream, void *ctx);

static int request(Py_buffer *body, StreamReader one, void *ctx) {
    int result = READ;
    Buf b = {(const unsigned char *)body->buf, (const unsigned char *)body->buf + body->len}, s;
    while (result == READ && b.p < b.end) {
        int field, wire;
        if (!next_key(&b, &field, &wire)) return OTHER;
        if (field == 1) {
            result = wire == 2 && delimited(&b, &s) ? one(&s, ctx) : OTHER;
        } else if (field == 2) { /* `format`: unused, but its UTF-8 is checked there too */
            PyObject *t = NULL;
            if (wire != 2 || !delimited(&b, &s) || (t = text(&s)) == NULL)
                result = PyErr_Occurred() ? FAILED : OTHER;
            Py_XDECREF(t);
        } else if (!skip(&b, wire)) {
            result = OTHER;
        }
    }
    return result;
}

/* what request() hands each stream's reader */
typedef struct {
    PyObject *out;
    long long ts_min, ts_max;
    Py_ssize_t max_labels;
    Cols cols;
} Reading;

static int read_stream(Buf *s, void *ctx) {
    Reading *r = ctx;
    return stream(s, r->out, r->ts_min, r->ts_max, r->max_labels);
}

static int read_stream_columns(Buf *s, void *ctx) {
    Reading *r = ctx;
    return stream_columns(s, &r->cols, r->out, r->ts_min, r->ts_max, r->max_labels);
}

/* request() with `one`: the list of what it read, None, or NULL with an exception set */
static PyObject *read_request(PyObject *args, StreamReader one) {
    Py_buffer body;
    Reading r;
    memset(&r, 0, sizeof r);
    if (!PyArg_ParseTuple(args, "y*LLn", &body, &r.ts_min, &r.ts_max, &r.max_labels))
        return NULL;
    r.out = PyList_New(0);
    int result = r.out == NULL ? FAILED : request(&body, one, &r);
    PyBuffer_Release(&body);
    cols_free(&r.cols);
    if (result == READ) return r.out;
    Py_XDECREF(r.out);
    if (result == FAILED) return NULL;
    Py_RETURN_NONE;
}

static PyObject *streams(PyObject *self, PyObject *args) {
    return read_request(args, read_stream);
}

static PyObject *columns(PyObject *self, PyObject *args) {
    return read_request(args, read_stream_columns);
}

static PyMethodDef methods[] = {
    {"streams", streams, METH_VARARGS, streams_doc},
    {"columns", columns, METH_VARARGS, columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pushproto",
    "Loki's protobuf push body read from its wire format; decode.py's generated classes are "
    "the fallback.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pushproto(void) {
    return PyModule_Create(&module);
}
