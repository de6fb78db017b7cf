/* _pushcolumns' second half (packcolumns.c): a stream's columns made into a pack. */
#ifndef LOGSTORE_PACKCOLUMNS_H
#define LOGSTORE_PACKCOLUMNS_H
#include <Python.h>

void pack_columns_init(void);
PyObject *pack_columns(PyObject *self, PyObject *args);
extern const char pack_columns_doc[];

#endif
