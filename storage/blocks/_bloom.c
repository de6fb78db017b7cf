/* A block's trigram Bloom filter in C: codec.build_bloom's bytes, without numpy's passes
 * over a 16 Mi-entry table. Optional: without this module codec.py builds the same bytes,
 * and tests/storage/test_bloom_c.py holds both to one answer. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* one bit per possible trigram; zero between calls (each call clears the bits it set).
 * Used with the GIL held, so the sealer's threads take it in turn. */
static uint64_t *seen;

PyDoc_STRVAR(build_doc,
"build(body, bits_per_key, probes, golden) -> bytes\n\n"
"codec.build_bloom(body): the Bloom filter over the distinct byte trigrams of body, ASCII\n"
"letters folded to lower case, bits_per_key bits a trigram (a multiple of 64 bits, at\n"
"least 64), probes probes (h1 + i*h2) of the trigram's code times golden.");

static PyObject *build(PyObject *self, PyObject *args) {
    Py_buffer body;
    int bits_per_key, probes;
    unsigned long long golden;
    if (!PyArg_ParseTuple(args, "y*iiK", &body, &bits_per_key, &probes, &golden)) return NULL;
    Py_ssize_t n = body.len;
    if (n < 3) {
        PyBuffer_Release(&body);
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    if (bits_per_key < 1 || probes < 1) {
        PyBuffer_Release(&body);
        PyErr_SetString(PyExc_ValueError, "bits_per_key and probes must be positive");
        return NULL;
    }
    if (seen == NULL && (seen = calloc((1u << 24) / 64, sizeof(uint64_t))) == NULL) {
        PyBuffer_Release(&body);
        return PyErr_NoMemory();
    }
    uint32_t *distinct = malloc((size_t)(n - 2) * sizeof(uint32_t));
    if (distinct == NULL) {
        PyBuffer_Release(&body);
        return PyErr_NoMemory();
    }
    const unsigned char *s = (const unsigned char *)body.buf;
    Py_ssize_t count = 0;
#define LOW(c) ((c) >= 'A' && (c) <= 'Z' ? (uint32_t)(c) + 32 : (uint32_t)(c))
    uint32_t code = (LOW(s[0]) << 8) | LOW(s[1]);
    for (Py_ssize_t i = 2; i < n; i++) {
        code = ((code << 8) | LOW(s[i])) & 0xFFFFFFu;
        uint64_t bit = (uint64_t)1 << (code & 63);
        if (!(seen[code >> 6] & bit)) {
            seen[code >> 6] |= bit;
            distinct[count++] = code;
        }
    }
#undef LOW
    PyBuffer_Release(&body);
    for (Py_ssize_t i = 0; i < count; i++) seen[distinct[i] >> 6] = 0;
    /* max(64, ceil(count * bits_per_key / 64) * 64), as codec.py works it out */
    uint64_t words = ((uint64_t)count * (uint64_t)bits_per_key + 63) / 64;
    uint64_t nbits = words < 1 ? 64 : words * 64;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nbits / 8));
    if (out == NULL) {
        free(distinct);
        return NULL;
    }
    unsigned char *bits = (unsigned char *)PyBytes_AS_STRING(out);
    memset(bits, 0, nbits / 8);
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t h = (uint64_t)distinct[i] * (uint64_t)golden;
        uint64_t h1 = h >> 32, h2 = (h & 0xFFFFFFFFu) | 1;
        for (int p = 0; p < probes; p++) {
            uint64_t j = (h1 + (uint64_t)p * h2) % nbits;
            bits[j >> 3] |= (unsigned char)(1u << (j & 7));
        }
    }
    free(distinct);
    return out;
}

static PyMethodDef methods[] = {
    {"build", build, METH_VARARGS, build_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bloom", "A block's trigram Bloom filter in C (codec.build_bloom).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bloom(void) {
    return PyModule_Create(&module);
}
