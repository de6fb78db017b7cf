/* LevelDetector.from_line in C for an ASCII line (levels.py), shared by _linescan.c (a list
 * of str) and _pushcolumns.c (a push's lines in one buffer). Included after Python.h. */
#ifndef LOGSTORE_LEVELSCAN_H
#define LOGSTORE_LEVELSCAN_H
#include <stdint.h>
#include <string.h>

#define MAX_WORDS 64
#define MAX_NORMALISED 16 /* longer values are in no level table: no lookup */

/* logfmt_edge and value_end: `[\s,;]` and `[\s"]` of the logfmt pattern (levels.py) */
static unsigned char logfmt_edge[256], value_end[256], lower[256];

typedef struct {
    unsigned char left[256], right[256]; /* the keyword scan's word boundaries */
} Edges;

/* str.isspace() of an ASCII character, which is what Python's `\s` and strip() use */
static inline int is_space(unsigned char c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
}

static inline void init_tables(void) {
    for (int c = 0; c < 256; c++) {
        lower[c] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : (unsigned char)c;
        logfmt_edge[c] = is_space((unsigned char)c) || c == ',' || c == ';';
        value_end[c] = is_space((unsigned char)c) || c == '"';
    }
}

/* one table of the characters of an ASCII str */
static inline int edge_of(PyObject *chars, unsigned char *table) {
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
    /* by a line's byte: the words that may begin there (a bit each, in order), so a scan
     * tries only those: the keyword scan tried every word at every word edge, most of a
     * pack's time in C for a realistic push's lines */
    uint64_t first[256];
} Words;

/* a tuple of ASCII str, in the order their alternation tries them */
static inline int words_of(PyObject *tuple, Words *out) {
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
    memset(out->first, 0, sizeof(out->first));
    for (int i = 0; i < out->n; i++)
        for (int c = 0; c < 256; c++)
            if (out->len[i] == 0 || lower[c] == (unsigned char)out->text[i][0])
                out->first[c] |= (uint64_t)1 << i;
    return 0;
}

/* the words that may begin at s[at] (none past the end but empty ones) */
static inline uint64_t words_at(const Words *w, const unsigned char *s, Py_ssize_t at,
                                Py_ssize_t n) {
    return w->first[at < n ? s[at] : 0];
}

/* s[at:at+len] lowercased equals word (already lowercase) */
static inline int lower_equals(const unsigned char *s, const char *word, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < len; i++)
        if (lower[s[i]] != (unsigned char)word[i]) return 0;
    return 1;
}

/* the keyword scan: index of the word found leftmost (the longer first at one place), -1 */
static inline int keyword_at(const unsigned char *s, Py_ssize_t n, const Words *kw,
                             const Edges *ed) {
    for (Py_ssize_t p = -1; p < n; p++) {
        if (p >= 0 && !ed->left[s[p]]) continue;
        uint64_t may = words_at(kw, s, p + 1, n);
        for (int k = 0; may; k++, may >>= 1) {
            if (!(may & 1)) continue;
            Py_ssize_t end = p + 1 + kw->len[k];
            if (end > n || !lower_equals(s + p + 1, kw->text[k], kw->len[k])) continue;
            if (end == n || ed->right[s[end]]) return k;
        }
    }
    return -1;
}

/* the logfmt search: 1 and the value's span when `<name>=<value>` is found with a value,
 * 0 when the first `<name>=` has an empty one or there is none (the keyword scan decides) */
static inline int logfmt_value(const unsigned char *s, Py_ssize_t n, const Words *names,
                        Py_ssize_t *vs, Py_ssize_t *ve) {
    for (Py_ssize_t p = -1; p < n; p++) {
        if (p >= 0 && !logfmt_edge[s[p]]) continue;
        uint64_t may = words_at(names, s, p + 1, n);
        for (int k = 0; may; k++, may >>= 1) {
            if (!(may & 1)) continue;
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
static inline PyObject *normalised(const unsigned char *v, Py_ssize_t len, PyObject *table) {
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
static inline int json_shaped(const unsigned char *s, Py_ssize_t n, Py_ssize_t *a, Py_ssize_t *b) {
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

static inline void json_ws(Json *j) {
    while (j->i < j->n) {
        unsigned char c = j->s[j->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        j->i++;
    }
}

/* a string at j->i (its quote): its content's span; *escaped when it holds escapes */
static inline int json_string(Json *j, Py_ssize_t *start, Py_ssize_t *end, int *escaped) {
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

static inline int json_number(Json *j) {
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

static inline int json_value(Json *j, int depth, Found *inner);

/* after a member or an element: 0 at the container's `close` (consumed), 1 after a comma
 * (the next one follows), JSON_DEFER for anything else */
static inline int json_next(Json *j, unsigned char close) {
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
static inline int json_object(Json *j, int depth, Found *found, Found *nested) {
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

static inline int json_array(Json *j, int depth) {
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
static inline int json_value(Json *j, int depth, Found *inner) {
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
static inline int json_level(const unsigned char *s, Py_ssize_t n, const Words *fields,
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

/* the arguments of a level scan, read once per call from their Python objects */
typedef struct {
    Words names, kw, fields;
    Edges edges;
    PyObject *table, *keyword_levels, *unknown; /* borrowed */
} Detector;

/* names, table, left, right, keywords, keyword_levels, unknown, fields: see levels() */
static inline int detector_of(Detector *d, PyObject *names, PyObject *table, PyObject *left,
                              PyObject *right, PyObject *keywords, PyObject *keyword_levels,
                              PyObject *unknown, PyObject *fields) {
    if (!PyTuple_Check(names) || !PyDict_Check(table) || !PyTuple_Check(keywords) ||
        !PyTuple_Check(keyword_levels) || !PyTuple_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "a level scan's arguments have the wrong types");
        return -1;
    }
    if (words_of(names, &d->names) < 0 || words_of(keywords, &d->kw) < 0 ||
        words_of(fields, &d->fields) < 0 || edge_of(left, d->edges.left) < 0 ||
        edge_of(right, d->edges.right) < 0)
        return -1;
    if (PyTuple_GET_SIZE(keyword_levels) != d->kw.n) {
        PyErr_SetString(PyExc_ValueError, "one level per keyword expected");
        return -1;
    }
    d->table = table;
    d->keyword_levels = keyword_levels;
    d->unknown = unknown;
    return 0;
}

/* from_line of the ASCII line s[0:n]: a new reference to its level, Py_None (a new
 * reference) for a JSON object left to msgspec, NULL with an exception set */
static inline PyObject *line_level(const Detector *d, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t vs, ve, a, b;
    int found;
    if (json_shaped(s, n, &a, &b)) {
        /* a level field of the object, else the keyword scan (never logfmt) */
        found = json_level(s + a, b - a, &d->fields, &vs, &ve);
        if (found == JSON_DEFER) return Py_NewRef(Py_None);
        vs += a;
        ve += a;
    } else {
        found = d->names.n && memchr(s, '=', (size_t)n) != NULL &&
                logfmt_value(s, n, &d->names, &vs, &ve);
    }
    if (found) return normalised(s + vs, ve - vs, d->table);
    int k = keyword_at(s, n, &d->kw, &d->edges);
    return Py_NewRef(k < 0 ? d->unknown : PyTuple_GET_ITEM(d->keyword_levels, k));
}

#endif
