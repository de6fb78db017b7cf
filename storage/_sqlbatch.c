/* A writer's statements run in one call, with the GIL released once (issue 25).
 *
 * The sqlite3 module releases the GIL around every step of a statement and takes it back
 * after: with the event loop and the threads that read the query workers' answers running
 * Python beside it, each return waited for the GIL, and a realistic push's append (about 20
 * steps) took 10.6 ms instead of 3.3 with one busy thread beside it (bench/REPORT.md). Here
 * a list of statements, their parameters bound from Python first, runs as one stretch
 * without the GIL.
 *
 * The sqlite3 functions are those of the library the sqlite3 module itself uses (found
 * loaded with RTLD_NOLOAD, never a second copy), on the connection's own handle: the
 * first field of CPython's pysqlite_Connection, checked against the connection's file name
 * before use (storage/sqlbatch.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef void (*destructor_fn)(void *);
#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_CONSTRAINT 19
#define SQLITE_NOMEM 7
#define SQLITE_PREPARE_PERSISTENT 0x01
#define SQLITE_STATIC ((destructor_fn)0)

static struct {
    int (*prepare_v3)(sqlite3 *, const char *, int, unsigned int, sqlite3_stmt **,
                      const char **);
    int (*bind_int64)(sqlite3_stmt *, int, long long);
    int (*bind_double)(sqlite3_stmt *, int, double);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, destructor_fn);
    int (*bind_blob)(sqlite3_stmt *, int, const void *, int, destructor_fn);
    int (*bind_null)(sqlite3_stmt *, int);
    int (*bind_parameter_count)(sqlite3_stmt *);
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*clear_bindings)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    int (*changes)(sqlite3 *);
    const char *(*errmsg)(sqlite3 *);
    int (*extended_errcode)(sqlite3 *);
    const char *(*db_filename)(sqlite3 *, const char *);
} api;

static PyObject *error_classes; /* sqlite3's OperationalError, IntegrityError, ... */
static PyTypeObject *connection_type; /* sqlite3.Connection */

/* the handle inside a sqlite3.Connection (CPython 3.11 to 3.13: its first field) */
typedef struct {
    PyObject_HEAD
    sqlite3 *db;
} Connection;

static sqlite3 *handle_of(PyObject *conn) {
    if (!PyObject_TypeCheck(conn, connection_type)) {
        PyErr_SetString(PyExc_TypeError, "a sqlite3.Connection expected");
        return NULL;
    }
    sqlite3 *db = ((Connection *)conn)->db;
    if (db == NULL) PyErr_SetString(PyExc_ValueError, "the connection is closed");
    return db;
}

static PyObject *filename(PyObject *self, PyObject *conn) {
    sqlite3 *db = handle_of(conn);
    if (db == NULL) return NULL;
    const char *name = api.db_filename(db, "main");
    return PyUnicode_DecodeFSDefault(name ? name : "");
}

/* the statement kept in `cache` for sql (prepared once, finalized with the capsule) */
static void finalize_capsule(PyObject *capsule) {
    sqlite3_stmt *stmt = PyCapsule_GetPointer(capsule, "sqlite3_stmt");
    if (stmt != NULL) api.finalize(stmt);
}

typedef struct {
    int kind; /* 0 null, 1 int, 2 double, 3 text, 4 blob */
    long long i;
    double d;
    const char *p;
    Py_ssize_t n;
} Value;

typedef struct {
    sqlite3_stmt *stmt;
    Value *values;
    Py_ssize_t count;
} Job;

static int value_of(PyObject *v, Value *out) {
    if (v == Py_None) {
        out->kind = 0;
    } else if (PyLong_Check(v)) {
        out->kind = 1;
        out->i = PyLong_AsLongLong(v);
        if (out->i == -1 && PyErr_Occurred()) return -1;
    } else if (PyFloat_Check(v)) {
        out->kind = 2;
        out->d = PyFloat_AS_DOUBLE(v);
    } else if (PyUnicode_Check(v)) {
        out->kind = 3;
        out->p = PyUnicode_AsUTF8AndSize(v, &out->n);
        if (out->p == NULL) return -1;
    } else if (PyBytes_Check(v)) {
        out->kind = 4;
        out->p = PyBytes_AS_STRING(v);
        out->n = PyBytes_GET_SIZE(v);
    } else {
        PyErr_Format(PyExc_TypeError, "a parameter of type %.100s", Py_TYPE(v)->tp_name);
        return -1;
    }
    if ((out->kind == 3 || out->kind == 4) && out->n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a parameter over 2 GiB");
        return -1;
    }
    return 0;
}

static sqlite3_stmt *statement(sqlite3 *db, PyObject *cache, PyObject *sql) {
    PyObject *kept = PyDict_GetItemWithError(cache, sql);
    if (kept != NULL) return PyCapsule_GetPointer(kept, "sqlite3_stmt");
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(sql, &n);
    if (text == NULL) return NULL;
    sqlite3_stmt *stmt = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = api.prepare_v3(db, text, (int)n + 1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL);
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK || stmt == NULL) {
        PyObject *cls = PyDict_GetItemString(error_classes, rc == SQLITE_NOMEM ? "m" : "o");
        PyErr_Format(cls ? cls : PyExc_RuntimeError, "%s", api.errmsg(db));
        if (stmt != NULL) api.finalize(stmt);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(stmt, "sqlite3_stmt", finalize_capsule);
    if (capsule == NULL) {
        api.finalize(stmt);
        return NULL;
    }
    int bad = PyDict_SetItem(cache, sql, capsule) < 0;
    Py_DECREF(capsule);
    return bad ? NULL : stmt;
}

PyDoc_STRVAR(run_doc,
"run(conn, cache, statements) -> list[int]\n\n"
"Each (sql, parameters) of `statements` run to its end on the connection, in order, with\n"
"the GIL released once; the rows a statement returns are dropped. `cache` (a dict) keeps\n"
"the prepared statements: clear it before the connection closes. Answers each statement's\n"
"changed rows; on an error stops there and raises sqlite3's exception for it (the\n"
"statements before it stay done, as with execute()).");

static PyObject *run(PyObject *self, PyObject *args) {
    PyObject *conn, *cache, *given, *result = NULL;
    if (!PyArg_ParseTuple(args, "OO!O", &conn, &PyDict_Type, &cache, &given)) return NULL;
    sqlite3 *db = handle_of(conn);
    if (db == NULL) return NULL;
    PyObject *list = PySequence_Fast(given, "statements: a list of (sql, parameters)");
    if (list == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(list), total = 0;
    Job *jobs = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Job));
    PyObject **params = PyMem_Calloc((size_t)(count ? count : 1), sizeof(PyObject *));
    Value *values = NULL;
    long long *changed = PyMem_Calloc((size_t)(count ? count : 1), sizeof(long long));
    if (jobs == NULL || params == NULL || changed == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(list, k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "a statement is (sql, parameters)");
            goto done;
        }
        params[k] = PySequence_Fast(PyTuple_GET_ITEM(item, 1), "parameters: a sequence");
        if (params[k] == NULL) goto done;
        jobs[k].count = PySequence_Fast_GET_SIZE(params[k]);
        total += jobs[k].count;
        jobs[k].stmt = statement(db, cache, PyTuple_GET_ITEM(item, 0));
        if (jobs[k].stmt == NULL) goto done;
        if (api.bind_parameter_count(jobs[k].stmt) != jobs[k].count) {
            PyErr_Format(PyExc_ValueError, "statement %zd takes %d parameters, given %zd", k,
                         api.bind_parameter_count(jobs[k].stmt), jobs[k].count);
            goto done;
        }
    }
    values = PyMem_Calloc((size_t)(total ? total : 1), sizeof(Value));
    if (values == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        jobs[k].values = values + at;
        for (Py_ssize_t i = 0; i < jobs[k].count; i++)
            if (value_of(PySequence_Fast_GET_ITEM(params[k], i), &jobs[k].values[i]) < 0)
                goto done;
        at += jobs[k].count;
    }
    int rc = SQLITE_DONE, code = 0;
    Py_ssize_t failed = -1;
    char *message = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < count && failed < 0; k++) {
        sqlite3_stmt *st = jobs[k].stmt;
        api.reset(st);
        api.clear_bindings(st);
        for (Py_ssize_t i = 0; i < jobs[k].count && rc != -1; i++) {
            const Value *v = &jobs[k].values[i];
            int b, col = (int)i + 1;
            switch (v->kind) {
            case 0: b = api.bind_null(st, col); break;
            case 1: b = api.bind_int64(st, col, v->i); break;
            case 2: b = api.bind_double(st, col, v->d); break;
            case 3: b = api.bind_text(st, col, v->p, (int)v->n, SQLITE_STATIC); break;
            default: b = api.bind_blob(st, col, v->p, (int)v->n, SQLITE_STATIC); break;
            }
            if (b != SQLITE_OK) rc = -1;
        }
        if (rc != -1) {
            do {
                rc = api.step(st);
            } while (rc == SQLITE_ROW);
        }
        if (rc != SQLITE_DONE) {
            failed = k;
            code = api.extended_errcode(db);
            const char *m = api.errmsg(db);
            message = m ? strdup(m) : NULL;
        } else {
            changed[k] = api.changes(db);
        }
        api.reset(st);
        api.clear_bindings(st);
    }
    Py_END_ALLOW_THREADS
    if (failed >= 0) {
        const char *which = (code & 0xFF) == SQLITE_CONSTRAINT ? "i" :
                            (code & 0xFF) == SQLITE_NOMEM ? "m" : "o";
        PyObject *cls = PyDict_GetItemString(error_classes, which);
        PyErr_SetString(cls ? cls : PyExc_RuntimeError, message ? message : "SQLite error");
        free(message);
        goto done;
    }
    result = PyList_New(count);
    if (result == NULL) goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *n = PyLong_FromLongLong(changed[k]);
        if (n == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, n);
    }
done:
    if (params != NULL)
        for (Py_ssize_t k = 0; k < count; k++) Py_XDECREF(params[k]);
    PyMem_Free(params);
    PyMem_Free(jobs);
    PyMem_Free(values);
    PyMem_Free(changed);
    Py_DECREF(list);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, run_doc},
    {"filename", filename, METH_O, "The file name of the connection's main database."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sqlbatch",
    "A writer's statements run with the GIL released once; sqlbatch.py is the fallback.",
    -1, methods, NULL, NULL, NULL, NULL,
};

#define FIND(field, name)                                                  \
    do {                                                                   \
        *(void **)(&api.field) = dlsym(lib, name);                         \
        if (api.field == NULL) {                                           \
            PyErr_SetString(PyExc_ImportError, "libsqlite3 lacks " name);  \
            return NULL;                                                   \
        }                                                                  \
    } while (0)

PyMODINIT_FUNC PyInit__sqlbatch(void) {
    /* the library the sqlite3 module loaded, never one of our own */
    PyObject *sqlite3_mod = PyImport_ImportModule("sqlite3");
    if (sqlite3_mod == NULL) return NULL;
    void *lib = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) {
        Py_DECREF(sqlite3_mod);
        PyErr_SetString(PyExc_ImportError, "the sqlite3 module does not use libsqlite3.so.0");
        return NULL;
    }
    FIND(prepare_v3, "sqlite3_prepare_v3");
    FIND(bind_int64, "sqlite3_bind_int64");
    FIND(bind_double, "sqlite3_bind_double");
    FIND(bind_text, "sqlite3_bind_text");
    FIND(bind_blob, "sqlite3_bind_blob");
    FIND(bind_null, "sqlite3_bind_null");
    FIND(bind_parameter_count, "sqlite3_bind_parameter_count");
    FIND(step, "sqlite3_step");
    FIND(reset, "sqlite3_reset");
    FIND(clear_bindings, "sqlite3_clear_bindings");
    FIND(finalize, "sqlite3_finalize");
    FIND(changes, "sqlite3_changes");
    FIND(errmsg, "sqlite3_errmsg");
    FIND(extended_errcode, "sqlite3_extended_errcode");
    FIND(db_filename, "sqlite3_db_filename");
    error_classes = PyDict_New();
    if (error_classes == NULL) return NULL;
    const char *names[][2] = {{"o", "OperationalError"}, {"i", "IntegrityError"},
                              {"m", "OperationalError"}};
    for (int k = 0; k < 3; k++) {
        PyObject *cls = PyObject_GetAttrString(sqlite3_mod, names[k][1]);
        if (cls == NULL || PyDict_SetItemString(error_classes, names[k][0], cls) < 0) {
            Py_XDECREF(cls);
            Py_DECREF(sqlite3_mod);
            return NULL;
        }
        Py_DECREF(cls);
    }
    PyObject *type = PyObject_GetAttrString(sqlite3_mod, "Connection");
    Py_DECREF(sqlite3_mod);
    if (type == NULL) return NULL;
    if (!PyType_Check(type)) {
        Py_DECREF(type);
        PyErr_SetString(PyExc_ImportError, "sqlite3.Connection is not a type");
        return NULL;
    }
    connection_type = (PyTypeObject *)type; /* kept for the module's life */
    return PyModule_Create(&module);
}
