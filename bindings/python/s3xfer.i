/* SWIG interface: the private module s3xfer._core.
 *
 * Thin by design: enums, knob constants and the client handle come straight
 * from the public headers; the operations are wrapped by small helpers that
 * release the GIL around the blocking C call and turn results into Python
 * objects. Errors become exceptions of s3xfer.errors (built there by
 * _from_c), so the one table that maps codes to classes lives in Python. */
%module(package="s3xfer") _core

%{
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "s3xfer/s3xfer.h"
#include "pyglue.h"
%}

%include <stdint.i>

/* From the public headers only the constants (enums, macros) are wrapped:
 * functions and structs reach Python through the glue below (as dicts and
 * tuples), because SWIG's shadow classes would refer to the extension
 * "__core" inside class bodies, where Python mangles the name. */
%rename("$ignore", %$isfunction, regextarget=1) "^s3x_";
%rename("$ignore", %$isclass, regextarget=1) "^s3x_";
%include "s3xfer/export.h"
%include "s3xfer/errors.h"
%include "s3xfer/params.h"
%include "s3xfer/client.h"
%include "s3xfer/bulk.h"

/* The client and batch handles are opaque pointers to Python. */
typedef struct s3x_client s3x_client;
typedef struct s3x_batch s3x_batch;

/* String arguments: our conversion instead of SWIG's, which encodes strictly
 * (a key listed with surrogateescape could not be passed back) and passes a
 * str with a NUL cut short (so "a\0b" named the object "a"). */
%typemap(in) const char * (PyObject *holder = NULL) {
    if (py_cstr_arg($input, "argument '$1_name'", &holder, (const char **)&$1) != 0) SWIG_fail;
}
%typemap(freearg) const char * {
    Py_XDECREF(holder$argnum);
}

/* The helpers below return PyObject* already, or NULL with an exception set. */
%typemap(out) PyObject * {
    if (!$1) SWIG_fail;
    $result = $1;
}

%include "pyglue.h"

%wrapper %{
PyObject *py_client_new(void) {
    s3x_client *c = NULL;
    if (s3x_client_new(&c) != 0) return py_raise_last();
    return SWIG_NewPointerObj(SWIG_as_voidptr(c), SWIGTYPE_p_s3x_client, 0);
}
%}

%wrapper %{
PyObject *py_batch_new(s3x_client *c, PyObject *knobs) {
    s3x_batch *b = NULL;
    if (s3x_batch_new(&b, c) != 0) return py_raise_last();
    if (py_batch_apply_knobs(b, knobs) != 0 || s3x_batch_start(b) != 0) {
        if (!PyErr_Occurred()) py_raise_last();
        s3x_batch_free(b);
        return NULL;
    }
    return SWIG_NewPointerObj(SWIG_as_voidptr(b), SWIGTYPE_p_s3x_batch, 0);
}
%}
