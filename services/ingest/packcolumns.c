/* A stream's columns made into a pack in C (issue 25), for `_pushcolumns.pack`: each line's
 * detected level, content hash and rollup tally, and the pack's columns, the same bytes as
 * storage/blocks/packs.py encode_columns. None for a stream the Python code must see line
 * by line (services/ingest/columns.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "levelscan.h"
#include "packcolumns.h"

#define MAX_SLOTS 64 /* distinct metadata texts of a stream's lines; more: the Python code */
#define FAILED -2    /* a Python exception is set */

/* this file's level-scan tables (levelscan.h's are per file) */
void pack_columns_init(void) {
    init_tables();
}

/* a stable order of the rows by timestamp (merge sort of positions) */
static int sort_order(const long long *ts, Py_ssize_t n, int32_t *order) {
    int32_t *tmp = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (tmp == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    for (Py_ssize_t i = 0; i < n; i++) order[i] = (int32_t)i;
    int32_t *a = order, *b = tmp;
    for (Py_ssize_t width = 1; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n;
            Py_ssize_t hi = lo + 2 * width < n ? lo + 2 * width : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) b[k++] = ts[a[j]] < ts[a[i]] ? a[j++] : a[i++];
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        int32_t *t = a;
        a = b;
        b = t;
    }
    if (a != order) memcpy(order, a, sizeof(int32_t) * (size_t)n);
    free(tmp);
    return 0;
}

typedef struct {
    long long minute;
    int slot;
    long long lines, bytes;
    int used;
} Tally;

/* the tally of (minute, slot), in a table of cap (a power of two) entries */
static Tally *tally_at(Tally *table, size_t cap, long long minute, int slot) {
    size_t h = ((size_t)(minute / 1000000000LL) * 0x9E3779B97F4A7C15ULL + (size_t)slot) & (cap - 1);
    while (table[h].used && (table[h].minute != minute || table[h].slot != slot))
        h = (h + 1) & (cap - 1);
    if (!table[h].used) {
        table[h].used = 1;
        table[h].minute = minute;
        table[h].slot = slot;
    }
    return &table[h];
}

/* a level that msgspec writes as it is inside a JSON string */
static int plain_level(PyObject *level, const char **text, Py_ssize_t *len) {
    if (!PyUnicode_Check(level) || !PyUnicode_IS_ASCII(level)) return 0;
    *text = (const char *)PyUnicode_DATA(level);
    *len = PyUnicode_GET_LENGTH(level);
    for (Py_ssize_t i = 0; i < *len; i++) {
        unsigned char c = (unsigned char)(*text)[i];
        if (c < 0x20 || c == '"' || c == '\\' || c == 0x7F) return 0;
    }
    return 1;
}

static int cmp_bytes(const void *a, const void *b) {
    PyObject *x = *(PyObject *const *)a, *y = *(PyObject *const *)b;
    Py_ssize_t nx = PyBytes_GET_SIZE(x), ny = PyBytes_GET_SIZE(y);
    int c = memcmp(PyBytes_AS_STRING(x), PyBytes_AS_STRING(y), (size_t)(nx < ny ? nx : ny));
    return c ? c : (nx > ny) - (nx < ny);
}

const char pack_columns_doc[] =
"pack(ts, text, ends, md, detect, minute_ns) -> tuple | None\n\n"
"A stream's rows from json_push's columns (ts, text, ends), in arrival order: each row's\n"
"metadata is `md` (a str, or None for none), or with `detect` (levels()'s arguments after\n"
"the lines) the text {\"detected_level\": ...} of its line's level. Answers (hashes as\n"
"int64 in arrival order, tallies {(minute, metadata text or ''): [lines, bytes]}, lines\n"
"that are whole minutes, the rows' timestamps sorted as int64 deltas, the first position\n"
"of that order, the order's int64 deltas, the lines' bytes in that order, their lengths'\n"
"bytes shuffled, each row's int32 index into the sorted distinct metadata texts (b\"\"\n"
"when none), those texts). None when a line's level is the Python code's to find, or\n"
"when two rows repeat one another (same timestamp and hash): prepare.py then takes it.";

PyObject *pack_columns(PyObject *self, PyObject *args) {
    Py_buffer tsb, textb, endsb;
    PyObject *md, *detect, *result = NULL, *slot_md[MAX_SLOTS], *slot_level[MAX_SLOTS];
    PyObject *slot_text[MAX_SLOTS];
    long long minute_ns;
    int slots = 0, left_to_python = 0;
    Detector d;
    if (!PyArg_ParseTuple(args, "y*y*y*OOL", &tsb, &textb, &endsb, &md, &detect, &minute_ns))
        return NULL;
    Py_ssize_t n = tsb.len / 8;
    const long long *ts = tsb.buf;
    const uint32_t *ends = endsb.buf;
    const unsigned char *text = textb.buf;
    int32_t *order = NULL, *slot_of = NULL;
    uint64_t *hashes = NULL;
    Tally *table = NULL;
    size_t cap = 16;
    PyObject *hashes_b = NULL, *tallies = NULL, *keys_b = NULL, *order_b = NULL, *body_b = NULL;
    PyObject *planes_b = NULL, *index_b = NULL, *texts = NULL;
    if (endsb.len != n * 4 || n < 1 || minute_ns <= 0 ||
        (n && (Py_ssize_t)ends[n - 1] != textb.len) || (md != Py_None && !PyUnicode_Check(md))) {
        PyErr_SetString(PyExc_ValueError, "pack: columns of one length expected");
        goto done;
    }
    if (detect != Py_None) {
        if (!PyTuple_Check(detect) || PyTuple_GET_SIZE(detect) != 8) {
            PyErr_SetString(PyExc_TypeError, "detect: levels()'s eight arguments");
            goto done;
        }
        PyObject **a = &PyTuple_GET_ITEM(detect, 0);
        if (detector_of(&d, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]) < 0) goto done;
    }
    order = malloc(sizeof(int32_t) * (size_t)n);
    slot_of = malloc(sizeof(int32_t) * (size_t)n);
    hashes = malloc(sizeof(uint64_t) * (size_t)n);
    while (cap < 2 * (size_t)n) cap *= 2;
    table = calloc(cap, sizeof(Tally));
    if (order == NULL || slot_of == NULL || hashes == NULL || table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* each row's metadata slot */
    if (detect == Py_None) {
        if (md != Py_None) {
            PyObject *b = PyUnicode_AsEncodedString(md, "utf-8", "surrogatepass");
            if (b == NULL) goto done;
            slot_md[0] = b;
            slot_level[0] = NULL;
            slot_text[0] = Py_NewRef(md);
            slots = 1;
        }
        for (Py_ssize_t i = 0; i < n; i++) slot_of[i] = slots ? 0 : -1;
    } else {
        for (Py_ssize_t i = 0; i < n && !left_to_python; i++) {
            uint32_t start = i ? ends[i - 1] : 0;
            const unsigned char *line = text + start;
            Py_ssize_t len = (Py_ssize_t)(ends[i] - start);
            for (Py_ssize_t k = 0; k < len; k++)
                if (line[k] & 0x80) {
                    left_to_python = 1;
                    break;
                }
            if (left_to_python) break;
            PyObject *level = line_level(&d, line, len);
            if (level == NULL) goto done;
            if (level == Py_None) { /* a JSON line msgspec reads */
                Py_DECREF(level);
                left_to_python = 1;
                break;
            }
            int k = 0;
            for (; k < slots; k++)
                if (slot_level[k] == level || PyUnicode_Compare(slot_level[k], level) == 0) break;
            if (k == slots) {
                const char *lt;
                Py_ssize_t ll;
                if (PyErr_Occurred() || slots == MAX_SLOTS || !plain_level(level, &lt, &ll)) {
                    Py_DECREF(level);
                    if (PyErr_Occurred()) goto done;
                    left_to_python = 1;
                    break;
                }
                PyObject *t = PyUnicode_FromFormat("{\"detected_level\":\"%U\"}", level);
                PyObject *b = t ? PyUnicode_AsUTF8String(t) : NULL;
                if (b == NULL) {
                    Py_XDECREF(t);
                    Py_DECREF(level);
                    goto done;
                }
                slot_level[k] = Py_NewRef(level);
                slot_md[k] = b;
                slot_text[k] = t;
                slots++;
            }
            Py_DECREF(level);
            slot_of[i] = k;
        }
        if (left_to_python) goto done;
    }
    /* hashes, tallies, and whether the rows come in time order */
    int sorted = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t start = i ? ends[i - 1] : 0, len = ends[i] - start;
        const Bytef *mdp = (const Bytef *)"";
        uInt mdn = 0;
        if (slot_of[i] >= 0) {
            mdp = (const Bytef *)PyBytes_AS_STRING(slot_md[slot_of[i]]);
            mdn = (uInt)PyBytes_GET_SIZE(slot_md[slot_of[i]]);
        }
        uLong crc = crc32(crc32(0L, text + start, len), mdp, mdn);
        uLong ad = adler32(adler32(1L, text + start, len), mdp, mdn);
        hashes[i] = ((uint64_t)(ad & 0x7FFFFFFFUL) << 32) | (uint64_t)(crc & 0xFFFFFFFFUL);
        long long rem = ts[i] % minute_ns;
        if (rem < 0) rem += minute_ns;
        Tally *t = tally_at(table, cap, ts[i] - rem, slot_of[i]);
        t->lines += 1;
        t->bytes += len;
        if (i && ts[i] < ts[i - 1]) sorted = 0;
    }
    if (sorted) {
        for (Py_ssize_t i = 0; i < n; i++) order[i] = (int32_t)i;
    } else if (sort_order(ts, n, order) < 0) {
        goto done;
    }
    /* repeats: rows of one timestamp (adjacent once sorted) with one hash */
    for (Py_ssize_t i = 0; i < n; i++)
        for (Py_ssize_t j = i + 1; j < n && ts[order[j]] == ts[order[i]]; j++)
            if (hashes[order[j]] == hashes[order[i]]) {
                left_to_python = 1;
                goto done;
            }
    /* the pack's columns in time order */
    hashes_b = PyBytes_FromStringAndSize((const char *)hashes, (Py_ssize_t)(8 * n));
    keys_b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * n));
    order_b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * (n - 1)));
    planes_b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * n));
    body_b = sorted ? PyBytes_FromStringAndSize((const char *)text, textb.len)
                    : PyBytes_FromStringAndSize(NULL, textb.len);
    index_b = PyBytes_FromStringAndSize(NULL, slots ? (Py_ssize_t)(4 * n) : 0);
    texts = PyList_New(slots);
    tallies = PyDict_New();
    if (!hashes_b || !keys_b || !order_b || !planes_b || !body_b || !index_b || !texts ||
        !tallies)
        goto done;
    long long *keys = (long long *)PyBytes_AS_STRING(keys_b);
    long long *deltas = (long long *)PyBytes_AS_STRING(order_b);
    unsigned char *planes = (unsigned char *)PyBytes_AS_STRING(planes_b);
    char *body = PyBytes_AS_STRING(body_b);
    long long aligned = 0;
    size_t at = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int32_t i = order[j];
        uint32_t start = i ? ends[i - 1] : 0, len = ends[i] - start;
        keys[j] = j ? ts[i] - ts[order[j - 1]] : ts[i];
        if (j) deltas[j - 1] = (long long)i - order[j - 1];
        if (ts[i] % minute_ns == 0) aligned++;
        for (int b = 0; b < 4; b++) planes[b * n + j] = (unsigned char)(len >> (8 * b));
        if (!sorted) memcpy(body + at, text + start, len);
        at += len;
    }
    /* the metadata texts sorted (as Python sorts str: by code point, here bytes) */
    int rank[MAX_SLOTS];
    if (slots) {
        PyObject *by[MAX_SLOTS];
        for (int k = 0; k < slots; k++) by[k] = slot_md[k];
        qsort(by, (size_t)slots, sizeof(PyObject *), cmp_bytes);
        for (int k = 0; k < slots; k++)
            for (int r = 0; r < slots; r++)
                if (by[r] == slot_md[k]) {
                    rank[k] = r;
                    PyList_SET_ITEM(texts, r, Py_NewRef(slot_text[k]));
                }
        int32_t *index = (int32_t *)PyBytes_AS_STRING(index_b);
        for (Py_ssize_t j = 0; j < n; j++) index[j] = rank[slot_of[order[j]]];
    }
    PyObject *empty = PyUnicode_FromStringAndSize("", 0);
    if (empty == NULL) goto done;
    for (size_t h = 0; h < cap; h++) {
        if (!table[h].used) continue;
        PyObject *key = Py_BuildValue("(LO)", table[h].minute,
                                      table[h].slot >= 0 ? slot_text[table[h].slot] : empty);
        PyObject *val = key ? Py_BuildValue("[LL]", table[h].lines, table[h].bytes) : NULL;
        int bad = val == NULL || PyDict_SetItem(tallies, key, val) < 0;
        Py_XDECREF(key);
        Py_XDECREF(val);
        if (bad) {
            Py_DECREF(empty);
            goto done;
        }
    }
    Py_DECREF(empty);
    result = Py_BuildValue("(OOLOiOOOOO)", hashes_b, tallies, aligned, keys_b,
                           (int)order[0], order_b, body_b, planes_b, index_b, texts);
done:
    for (int k = 0; k < slots; k++) {
        Py_XDECREF(slot_md[k]);
        Py_XDECREF(slot_text[k]);
        if (detect != Py_None) Py_XDECREF(slot_level[k]);
    }
    Py_XDECREF(hashes_b);
    Py_XDECREF(tallies);
    Py_XDECREF(keys_b);
    Py_XDECREF(order_b);
    Py_XDECREF(body_b);
    Py_XDECREF(planes_b);
    Py_XDECREF(index_b);
    Py_XDECREF(texts);
    free(order);
    free(slot_of);
    free(hashes);
    free(table);
    PyBuffer_Release(&tsb);
    PyBuffer_Release(&textb);
    PyBuffer_Release(&endsb);
    if (result == NULL && !PyErr_Occurred() && left_to_python) Py_RETURN_NONE;
    return result;
}

