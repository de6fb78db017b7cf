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

#define MAX_WORDS 64
#define MAX_NORMALISED 16 /* longer values are in no level table: no lookup */

/* logfmt_edge and value_end: `[\s,;]` and `[\s"]` of the logfmt pattern (levels.py) */
static unsigned char logfmt_edge[256], value_end[256], lower[256];

typedef struct {
    unsigned char left[256], right[256]; /* the keyword scan's word boundaries */
} Edges;

/* str.isspace() of an ASCII character, which is what Python's `\s` and strip() use */
static int is_space(unsigned char c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
}

static void init_tables(void) {
    for (int c = 0; c < 256; c++) {
        lower[c] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : (unsigned char)c;
        logfmt_edge[c] = is_space((unsigned char)c) || c == ',' || c == ';';
        value_end[c] = is_space((unsigned char)c) || c == '"';
    }
}

/* one table of the characters of an ASCII str */
static int edge_of(PyObject *chars, unsigned char *table) {
    Py_ssize_t n;
    const char *text = PyUnicode_Check(chars) && PyUnicode_IS_ASCII(chars)
        ? PyUnicode_AsUTF8AndSize(chars, &n) : NULL;
    if (text == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "edges must be ASCII str");
        return -1;
    }
    memset(table, 0, 256);
    for (Py_ssize_t i = 0; i < n; i++) table[(unsigned char)text[i]] = 1;
    return 0;
}

typedef struct {
    const char *text[MAX_WORDS];
    Py_ssize_t len[MAX_WORDS];
    int n;
} Words;

/* a tuple of ASCII str, in the order their alternation tries them */
static int words_of(PyObject *tuple, Words *out) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) > MAX_WORDS) {
        PyErr_SetString(PyExc_TypeError, "a tuple of at most 64 str expected");
        return -1;
    }
    out->n = (int)PyTuple_GET_SIZE(tuple);
    for (int i = 0; i < out->n; i++) {
        PyObject *w = PyTuple_GET_ITEM(tuple, i);
        if (!PyUnicode_Check(w) || !PyUnicode_IS_ASCII(w)) {
            PyErr_SetString(PyExc_TypeError, "words must be ASCII str");
            return -1;
        }
        out->text[i] = PyUnicode_AsUTF8AndSize(w, &out->len[i]);
        if (out->text[i] == NULL) return -1;
    }
    return 0;
}

/* s[at:at+len] lowercased equals word (already lowercase) */
static int lower_equals(const unsigned char *s, const char *word, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < len; i++)
        if (lower[s[i]] != (unsigned char)word[i]) return 0;
    return 1;
}

/* the keyword scan: index of the word found leftmost (the longer first at one place), -1 */
static int keyword_at(const unsigned char *s, Py_ssize_t n, const Words *kw, const Edges *ed) {
    for (Py_ssize_t p = -1; p < n; p++) {
        if (p >= 0 && !ed->left[s[p]]) continue;
        for (int k = 0; k < kw->n; k++) {
            Py_ssize_t end = p + 1 + kw->len[k];
            if (end > n || !lower_equals(s + p + 1, kw->text[k], kw->len[k])) continue;
            if (end == n || ed->right[s[end]]) return k;
        }
    }
    return -1;
}

/* the logfmt search: 1 and the value's span when `<name>=<value>` is found with a value,
 * 0 when the first `<name>=` has an empty one or there is none (the keyword scan decides) */
static int logfmt_value(const unsigned char *s, Py_ssize_t n, const Words *names,
                        Py_ssize_t *vs, Py_ssize_t *ve) {
    for (Py_ssize_t p = -1; p < n; p++) {
        if (p >= 0 && !logfmt_edge[s[p]]) continue;
        for (int k = 0; k < names->n; k++) {
            Py_ssize_t eq = p + 1 + names->len[k];
            if (eq >= n || s[eq] != '=' ||
                !lower_equals(s + p + 1, names->text[k], names->len[k])) continue;
            Py_ssize_t q = eq + 1, e = q;
            if (q < n && s[q] == '"') {
                const unsigned char *close = memchr(s + q + 1, '"', (size_t)(n - q - 1));
                if (close != NULL) {
                    *vs = q + 1;
                    *ve = close - s;
                    return *ve > *vs;
                }
                return 0; /* no closing quote: the bare alternative, empty at the quote */
            }
            while (e < n && !value_end[s[e]]) e++;
            *vs = q;
            *ve = e;
            return e > q;
        }
    }
    return 0;
}

/* normalise_level(): the known name's level, else the value as written */
static PyObject *normalised(const unsigned char *v, Py_ssize_t len, PyObject *table) {
    if (len <= MAX_NORMALISED) {
        char low[MAX_NORMALISED];
        for (Py_ssize_t i = 0; i < len; i++) low[i] = (char)lower[v[i]];
        PyObject *key = PyUnicode_FromStringAndSize(low, len);
        if (key == NULL) return NULL;
        PyObject *found = PyDict_GetItemWithError(table, key);
        Py_DECREF(key);
        if (found != NULL) return Py_NewRef(found);
        if (PyErr_Occurred()) return NULL;
    }
    return PyUnicode_FromStringAndSize((const char *)v, len);
}

/* whether line.strip() is `{...}`, and that span */
static int json_shaped(const unsigned char *s, Py_ssize_t n, Py_ssize_t *a, Py_ssize_t *b) {
    if (memchr(s, '{', (size_t)n) == NULL) return 0;
    *a = 0;
    *b = n;
    while (*a < *b && is_space(s[*a])) (*a)++;
    while (*b > *a && is_space(s[*b - 1])) (*b)--;
    return *b > *a && s[*a] == '{' && s[*b - 1] == '}';
}


/* -- a JSON object line's level (LevelDetector._from_json) ----------------------------------
 * A strict JSON parser that answers only where msgspec surely agrees: a \u escape, an
 * escaped key or level value, a number with an exponent or over 18 integer digits, nesting
 * past JSON_DEPTH, a repeated key or more than JSON_KEYS keys in an object of the first two
 * levels, and anything invalid leave the line to the Python code (JSON_DEFER). */
#define JSON_DEPTH 32
#define JSON_KEYS 64
#define JSON_DEFER -2

typedef struct {
    const unsigned char *s;
    Py_ssize_t i, n;
    const Words *fields; /* as written (case-sensitive), in the order they are tried */
} Json;

/* the best field found in one object: its rank in `fields` and its value's span */
typedef struct {
    int rank;
    Py_ssize_t vs, ve;
} Found;

static void json_ws(Json *j) {
    while (j->i < j->n) {
        unsigned char c = j->s[j->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        j->i++;
    }
}

/* a string at j->i (its quote): its content's span; *escaped when it holds escapes */
static int json_string(Json *j, Py_ssize_t *start, Py_ssize_t *end, int *escaped) {
    if (j->i >= j->n || j->s[j->i] != '"') return JSON_DEFER;
    Py_ssize_t i = j->i + 1;
    *escaped = 0;
    *start = i;
    for (; i < j->n; i++) {
        unsigned char c = j->s[i];
        if (c == '"') {
            *end = i;
            j->i = i + 1;
            return 0;
        }
        if (c < 0x20) return JSON_DEFER;
        if (c == '\\') {
            if (i + 1 >= j->n) return JSON_DEFER;
            c = j->s[++i];
            if (!strchr("\"\\/bfnrt", c) || c == 0) return JSON_DEFER; /* \u too */
            *escaped = 1;
        }
    }
    return JSON_DEFER;
}

static int json_number(Json *j) {
    Py_ssize_t i = j->i, digits;
    if (i < j->n && j->s[i] == '-') i++;
    if (i >= j->n) return JSON_DEFER;
    if (j->s[i] == '0') {
        i++;
    } else if (j->s[i] >= '1' && j->s[i] <= '9') {
        for (digits = 0; i < j->n && j->s[i] >= '0' && j->s[i] <= '9'; i++) digits++;
        if (digits > 18) return JSON_DEFER;
    } else {
        return JSON_DEFER;
    }
    if (i < j->n && j->s[i] == '.') {
        i++;
        for (digits = 0; i < j->n && j->s[i] >= '0' && j->s[i] <= '9'; i++) digits++;
        if (!digits) return JSON_DEFER;
    }
    if (i < j->n && (j->s[i] == 'e' || j->s[i] == 'E')) return JSON_DEFER;
    j->i = i;
    return 0;
}

static int json_value(Json *j, int depth, Found *inner);

/* after a member or an element: 0 at the container's `close` (consumed), 1 after a comma
 * (the next one follows), JSON_DEFER for anything else */
static int json_next(Json *j, unsigned char close) {
    json_ws(j);
    if (j->i >= j->n) return JSON_DEFER;
    if (j->s[j->i] == close) {
        j->i++;
        return 0;
    }
    if (j->s[j->i] != ',') return JSON_DEFER;
    j->i++;
    json_ws(j);
    return 1;
}

/* an object at j->i; at depth 1 and 2 `found` gets its best field; at depth 1 `nested`
 * gets the first member object (in order) whose own best field was found */
static int json_object(Json *j, int depth, Found *found, Found *nested) {
    Py_ssize_t keys_s[JSON_KEYS], keys_e[JSON_KEYS];
    int keys = 0, tracked = depth <= 2;
    found->rank = -1;
    if (nested) nested->rank = -1;
    if (depth > JSON_DEPTH) return JSON_DEFER;
    j->i++; /* the brace */
    json_ws(j);
    if (j->i < j->n && j->s[j->i] == '}') {
        j->i++;
        return 0;
    }
    for (;;) {
        Py_ssize_t ks, ke;
        int escaped;
        if (json_string(j, &ks, &ke, &escaped) < 0) return JSON_DEFER;
        json_ws(j);
        if (j->i >= j->n || j->s[j->i] != ':') return JSON_DEFER;
        j->i++;
        json_ws(j);
        int rank = -1;
        if (tracked) {
            if (escaped || keys >= JSON_KEYS) return JSON_DEFER;
            for (int k = 0; k < keys; k++)
                if (keys_e[k] - keys_s[k] == ke - ks &&
                    memcmp(j->s + keys_s[k], j->s + ks, (size_t)(ke - ks)) == 0)
                    return JSON_DEFER; /* a repeated key: the last one counts */
            keys_s[keys] = ks;
            keys_e[keys] = ke;
            keys++;
            for (int f = 0; f < j->fields->n; f++)
                if (j->fields->len[f] == ke - ks &&
                    memcmp(j->fields->text[f], j->s + ks, (size_t)(ke - ks)) == 0) {
                    rank = f;
                    break;
                }
        }
        Found inner = {-1, 0, 0};
        if (rank >= 0 && j->i < j->n && j->s[j->i] == '"') {
            Py_ssize_t vs, ve;
            if (json_string(j, &vs, &ve, &escaped) < 0 || escaped) return JSON_DEFER;
            if (ve > vs && (found->rank < 0 || rank < found->rank)) {
                found->rank = rank;
                found->vs = vs;
                found->ve = ve;
            }
        } else {
            Py_ssize_t at = j->i;
            if (json_value(j, depth, &inner) < 0) return JSON_DEFER;
            if (nested && nested->rank < 0 && j->s[at] == '{' && inner.rank >= 0) *nested = inner;
        }
        int next = json_next(j, '}');
        if (next != 1) return next;
    }
}

static int json_array(Json *j, int depth) {
    Found unused;
    if (depth > JSON_DEPTH) return JSON_DEFER;
    j->i++;
    json_ws(j);
    if (j->i < j->n && j->s[j->i] == ']') {
        j->i++;
        return 0;
    }
    for (;;) {
        if (json_value(j, depth, &unused) < 0) return JSON_DEFER;
        int next = json_next(j, ']');
        if (next != 1) return next;
    }
}

/* a value inside a container at `depth`; an object's best field goes to `inner` */
static int json_value(Json *j, int depth, Found *inner) {
    inner->rank = -1;
    if (j->i >= j->n) return JSON_DEFER;
    unsigned char c = j->s[j->i];
    Py_ssize_t a, b;
    int escaped;
    switch (c) {
    case '{': return json_object(j, depth + 1, inner, NULL);
    case '[': return json_array(j, depth + 1);
    case '"': return json_string(j, &a, &b, &escaped);
    case 't':
        if (j->n - j->i >= 4 && memcmp(j->s + j->i, "true", 4) == 0) { j->i += 4; return 0; }
        return JSON_DEFER;
    case 'f':
        if (j->n - j->i >= 5 && memcmp(j->s + j->i, "false", 5) == 0) { j->i += 5; return 0; }
        return JSON_DEFER;
    case 'n':
        if (j->n - j->i >= 4 && memcmp(j->s + j->i, "null", 4) == 0) { j->i += 4; return 0; }
        return JSON_DEFER;
    default: return json_number(j);
    }
}

/* the level field's span of the JSON object s[0:n] (stripped): 1 found, 0 none (the keyword
 * scan decides), JSON_DEFER for the Python code */
static int json_level(const unsigned char *s, Py_ssize_t n, const Words *fields,
                      Py_ssize_t *vs, Py_ssize_t *ve) {
    Json j = {s, 0, n, fields};
    Found top, nested;
    if (json_object(&j, 1, &top, &nested) < 0) return JSON_DEFER;
    json_ws(&j);
    if (j.i != n) return JSON_DEFER;
    Found *f = top.rank >= 0 ? &top : nested.rank >= 0 ? &nested : NULL;
    if (f == NULL) return 0;
    *vs = f->vs;
    *ve = f->ve;
    return 1;
}

PyDoc_STRVAR(levels_doc,
"levels(lines, names, table, left, right, keywords, keyword_levels, unknown, fields)\n\n"
"LevelDetector.from_line of each ASCII line; None for the others and for a JSON object\n"
"it leaves to msgspec. names: the lowercase logfmt field names, longest first; table:\n"
"normalise_level's; left and right: the characters before and after a keyword;\n"
"keywords and keyword_levels: the keyword scan's words in the order it tries them and\n"
"the level of each; unknown: the level when nothing is found; fields: the level fields\n"
"as written, in the order a JSON object is searched for them.");

static PyObject *levels(PyObject *self, PyObject *args) {
    PyObject *given, *names_t, *table, *left, *right, *keywords_t, *keyword_levels, *unknown;
    PyObject *fields_t;
    if (!PyArg_ParseTuple(args, "OO!O!OOO!O!OO!", &given, &PyTuple_Type, &names_t,
                          &PyDict_Type, &table, &left, &right, &PyTuple_Type, &keywords_t,
                          &PyTuple_Type, &keyword_levels, &unknown, &PyTuple_Type, &fields_t))
        return NULL;
    Words names, kw, fields;
    Edges edges;
    if (words_of(names_t, &names) < 0 || words_of(keywords_t, &kw) < 0 ||
        words_of(fields_t, &fields) < 0 || edge_of(left, edges.left) < 0 ||
        edge_of(right, edges.right) < 0)
        return NULL;
    if (PyTuple_GET_SIZE(keyword_levels) != kw.n) {
        PyErr_SetString(PyExc_ValueError, "one level per keyword expected");
        return NULL;
    }
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
        Py_ssize_t n = PyUnicode_GET_LENGTH(line), vs, ve, a, b;
        const unsigned char *s = (const unsigned char *)PyUnicode_DATA(line);
        int found;
        if (json_shaped(s, n, &a, &b)) {
            /* a level field of the object, else the keyword scan (never logfmt) */
            found = json_level(s + a, b - a, &fields, &vs, &ve);
            if (found == JSON_DEFER) {
                PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
                continue;
            }
            vs += a;
            ve += a;
        } else {
            found = names.n && memchr(s, '=', (size_t)n) != NULL &&
                    logfmt_value(s, n, &names, &vs, &ve);
        }
        if (found) {
            level = normalised(s + vs, ve - vs, table);
            if (level == NULL) {
                Py_DECREF(out);
                Py_DECREF(lines);
                return NULL;
            }
        } else {
            int k = keyword_at(s, n, &kw, &edges);
            level = Py_NewRef(k < 0 ? unknown : PyTuple_GET_ITEM(keyword_levels, k));
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
