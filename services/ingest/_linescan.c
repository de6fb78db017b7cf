/* The per-line loops of a push in C: the entries of a JSON stream (decode.py), level
 * detection (levels.py), the lines' content hashes with their UTF-8 sizes (prepare.py) and
 * the rollup tallies (storage/entries.py). Optional: without this module
 * the Python code does the same, and tests/ingest/test_linescan.py holds both to one
 * answer. Each function answers exactly as its Python twin or returns None for a line (or
 * a list) it does not take: the caller then uses the Python code for it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <string.h>
#include <zlib.h>

#include "levelscan.h"


PyDoc_STRVAR(levels_doc,
"levels(lines, names, table, left, right, keywords, keyword_levels, unknown, fields)\n\n"
"LevelDetector.from_line of each ASCII line; None for the others and for a JSON object\n"
"it leaves to msgspec. names: the lowercase logfmt field names, longest first; table:\n"
"normalise_level's; left and right: the characters before and after a keyword;\n"
"keywords and keyword_levels: the keyword scan's words in the order it tries them and\n"
"the level of each; unknown: the level when nothing is found; fields: the level fields\n"
"as written, in the order a JSON object is searched for them.");

static PyObject *levels(PyObject *self, PyObject *args) {
    PyObject *given, *names, *table, *left, *right, *keywords, *keyword_levels, *unknown;
    PyObject *fields;
    Detector d;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &given, &names, &table, &left, &right, &keywords,
                          &keyword_levels, &unknown, &fields) ||
        detector_of(&d, names, table, left, right, keywords, keyword_levels, unknown,
                    fields) < 0)
        return NULL;
    PyObject *lines = PySequence_Fast(given, "lines: a list or tuple of str expected");
    if (lines == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(lines);
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        Py_DECREF(lines);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *line = PySequence_Fast_GET_ITEM(lines, i), *level;
        if (!PyUnicode_Check(line) || !PyUnicode_IS_ASCII(line)) {
            PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
            continue;
        }
        level = line_level(&d, (const unsigned char *)PyUnicode_DATA(line),
                           PyUnicode_GET_LENGTH(line));
        if (level == NULL) {
            Py_DECREF(out);
            Py_DECREF(lines);
            return NULL;
        }
        PyList_SET_ITEM(out, i, level);
    }
    Py_DECREF(lines);
    return out;
}

PyDoc_STRVAR(hashes_doc,
"hashes(lines, metadata) -> (hashes, sizes) | None\n\n"
"prepare.entry_hashes of the lines' UTF-8 bytes and the UTF-8 size of each; metadata is\n"
"one bytes for every line or a list of bytes, one per line. None when a line does not\n"
"encode as strict UTF-8 (a lone surrogate): the caller encodes those itself.");

static PyObject *hashes(PyObject *self, PyObject *args) {
    PyObject *given, *metadata;
    if (!PyArg_ParseTuple(args, "OO", &given, &metadata)) return NULL;
    int per_line = PyList_Check(metadata);
    PyObject *lines = PySequence_Fast(given, "lines: a list or tuple of str expected");
    if (lines == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(lines);
    if (per_line ? PyList_GET_SIZE(metadata) != count : !PyBytes_Check(metadata)) {
        Py_DECREF(lines);
        PyErr_SetString(PyExc_TypeError, "metadata: bytes, or a list of bytes per line");
        return NULL;
    }
    PyObject *hs = PyList_New(count), *sizes = PyList_New(count), *result = NULL;
    if (hs == NULL || sizes == NULL) goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *line = PySequence_Fast_GET_ITEM(lines, i);
        PyObject *md = per_line ? PyList_GET_ITEM(metadata, i) : metadata;
        Py_ssize_t n;
        if (!PyUnicode_Check(line) || !PyBytes_Check(md)) {
            PyErr_SetString(PyExc_TypeError, "lines are str, metadata bytes");
            goto fail;
        }
        const char *data = PyUnicode_AsUTF8AndSize(line, &n);
        if (data == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) goto fail;
            PyErr_Clear();
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (n > 0xFFFFFFFFLL || PyBytes_GET_SIZE(md) > 0xFFFFFFFFLL) {
            /* zlib takes 32-bit lengths: the Python code handles such a line */
            result = Py_NewRef(Py_None);
            goto done;
        }
        const Bytef *mdp = (const Bytef *)PyBytes_AS_STRING(md);
        uInt mdn = (uInt)PyBytes_GET_SIZE(md);
        uLong crc = crc32(crc32(0L, (const Bytef *)data, (uInt)n), mdp, mdn);
        uLong ad = adler32(adler32(1L, (const Bytef *)data, (uInt)n), mdp, mdn);
        unsigned long long h = ((unsigned long long)(ad & 0x7FFFFFFFUL) << 32) |
                               (unsigned long long)(crc & 0xFFFFFFFFUL);
        PyObject *hv = PyLong_FromUnsignedLongLong(h), *sv = PyLong_FromSsize_t(n);
        if (hv == NULL || sv == NULL) {
            Py_XDECREF(hv);
            Py_XDECREF(sv);
            goto fail;
        }
        PyList_SET_ITEM(hs, i, hv);
        PyList_SET_ITEM(sizes, i, sv);
    }
    result = PyTuple_Pack(2, hs, sizes);
    goto done;
fail:
    result = NULL;
done:
    Py_XDECREF(hs);
    Py_XDECREF(sizes);
    Py_DECREF(lines);
    return result;
}


PyDoc_STRVAR(json_entries_doc,
"json_entries(values, ts_min, ts_max) -> list | None\n\n"
"decode._json_entries for a stream whose every value is [timestamp, line], both str, the\n"
"timestamp plain ASCII digits (a leading '-' allowed) within [ts_min, ts_max]: the\n"
"entries (ts, line, None). None for anything else: the Python code decides those.");

/* int() of a str of plain digits, 0 when it is not one or is beyond int64 */
static int plain_int(PyObject *text, long long *out) {
    if (!PyUnicode_CheckExact(text) || !PyUnicode_IS_ASCII(text)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    const char *s = (const char *)PyUnicode_DATA(text);
    int negative = n > 0 && s[0] == '-';
    i = negative;
    if (i >= n || n - i > 19) return 0; /* 19 digits fit in uint64 */
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (unsigned long long)(s[i] - '0');
    }
    if (v > (unsigned long long)LLONG_MAX) return 0;
    *out = negative ? -(long long)v : (long long)v;
    return 1;
}

static PyObject *json_entries(PyObject *self, PyObject *args) {
    PyObject *values;
    long long ts_min, ts_max;
    if (!PyArg_ParseTuple(args, "O!LL", &PyList_Type, &values, &ts_min, &ts_max)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(values);
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        long long ts;
        if (!PyList_CheckExact(v) || PyList_GET_SIZE(v) != 2 ||
            !PyUnicode_CheckExact(PyList_GET_ITEM(v, 1)) ||
            !plain_int(PyList_GET_ITEM(v, 0), &ts) || ts < ts_min || ts > ts_max) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *stamp = PyLong_FromLongLong(ts);
        if (stamp == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject *entry = PyTuple_Pack(3, stamp, PyList_GET_ITEM(v, 1), Py_None);
        Py_DECREF(stamp);
        if (entry == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, entry);
    }
    return out;
}

PyDoc_STRVAR(tally_doc,
"tally(tallies, timestamps, metadata, sizes, minute_ns)\n\n"
"entries.tally: adds each row to tallies[(its minute, its metadata text or '')] =\n"
"[lines, bytes]. metadata: one str or None for every row, or a list of them.");

/* tallies[key] += (lines, size), the key made of minute and md */
static int add_tally(PyObject *tallies, long long minute, PyObject *md, long long lines,
                     long long size) {
    PyObject *stamp = PyLong_FromLongLong(minute), *key = NULL, *counts, *a = NULL, *b = NULL;
    int rc = -1;
    if (stamp == NULL) return -1;
    key = PyTuple_Pack(2, stamp, md);
    Py_DECREF(stamp);
    if (key == NULL) return -1;
    counts = PyDict_GetItemWithError(tallies, key);
    if (counts == NULL) {
        if (PyErr_Occurred()) goto done;
        PyObject *fresh = Py_BuildValue("[LL]", lines, size);
        if (fresh == NULL) goto done;
        rc = PyDict_SetItem(tallies, key, fresh);
        Py_DECREF(fresh);
        goto done;
    }
    if (!PyList_Check(counts) || PyList_GET_SIZE(counts) != 2) {
        PyErr_SetString(PyExc_TypeError, "a tally is a list [lines, bytes]");
        goto done;
    }
    PyObject *n = PyLong_FromLongLong(lines), *z = PyLong_FromLongLong(size);
    if (n != NULL && z != NULL) {
        a = PyNumber_Add(PyList_GET_ITEM(counts, 0), n);
        b = PyNumber_Add(PyList_GET_ITEM(counts, 1), z);
    }
    Py_XDECREF(n);
    Py_XDECREF(z);
    if (a == NULL || b == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        goto done;
    }
    PyList_SetItem(counts, 0, a); /* steals a and b */
    PyList_SetItem(counts, 1, b);
    rc = 0;
done:
    Py_DECREF(key);
    return rc;
}

static PyObject *tally(PyObject *self, PyObject *args) {
    PyObject *tallies, *stamps_in, *metadata, *sizes_in, *stamps = NULL, *sizes = NULL;
    PyObject *empty = NULL, *result = NULL;
    long long minute_ns;
    if (!PyArg_ParseTuple(args, "O!OOOL", &PyDict_Type, &tallies, &stamps_in, &metadata,
                          &sizes_in, &minute_ns))
        return NULL;
    if (minute_ns <= 0) {
        PyErr_SetString(PyExc_ValueError, "minute_ns must be positive");
        return NULL;
    }
    stamps = PySequence_Fast(stamps_in, "timestamps: a sequence of int");
    sizes = stamps ? PySequence_Fast(sizes_in, "sizes: a sequence of int") : NULL;
    empty = PyUnicode_FromStringAndSize("", 0);
    if (stamps == NULL || sizes == NULL || empty == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(stamps);
    int per_row = PyList_Check(metadata);
    if (PySequence_Fast_GET_SIZE(sizes) != n || (per_row && PyList_GET_SIZE(metadata) != n)) {
        PyErr_SetString(PyExc_ValueError, "one timestamp, size and metadata per row");
        goto done;
    }
    /* a run of rows with one minute and one metadata object is added once */
    long long run_minute = 0, run_lines = 0, run_bytes = 0;
    PyObject *run_md = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long ts = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(stamps, i));
        long long size = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sizes, i));
        if ((ts == -1 || size == -1) && PyErr_Occurred()) goto done;
        long long rem = ts % minute_ns;
        if (rem < 0) rem += minute_ns;
        PyObject *md = per_row ? PyList_GET_ITEM(metadata, i) : metadata;
        if (md == Py_None || (PyUnicode_Check(md) && PyUnicode_GET_LENGTH(md) == 0)) md = empty;
        if (run_lines && (ts - rem != run_minute || md != run_md)) {
            if (add_tally(tallies, run_minute, run_md, run_lines, run_bytes) < 0) goto done;
            run_lines = run_bytes = 0;
        }
        run_minute = ts - rem;
        run_md = md;
        run_lines += 1;
        run_bytes += size;
    }
    if (run_lines && add_tally(tallies, run_minute, run_md, run_lines, run_bytes) < 0) goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(stamps);
    Py_XDECREF(sizes);
    Py_XDECREF(empty);
    return result;
}

static PyMethodDef methods[] = {
    {"levels", levels, METH_VARARGS, levels_doc},
    {"hashes", hashes, METH_VARARGS, hashes_doc},
    {"json_entries", json_entries, METH_VARARGS, json_entries_doc},
    {"tally", tally, METH_VARARGS, tally_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_linescan",
    "A push's per-line loops in C (levels, content hashes); the Python code is the fallback.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__linescan(void) {
    init_tables();
    return PyModule_Create(&module);
}
