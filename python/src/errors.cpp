// kiln.Error and one subclass per error code. Each subclass also derives from the
// matching Python built-in (ShapeError is a ValueError, IOError an OSError, ...), so
// generic `except ValueError` code keeps working.
#include "bindings.hpp"

#include <map>

namespace kiln::python {

namespace {
std::map<error_code, PyObject*>& error_types() {
    static std::map<error_code, PyObject*> t;
    return t;
}
PyObject* base_error = nullptr;
}  // namespace

void bind_errors(py::module_& m) {
    base_error = PyErr_NewExceptionWithDoc("kiln.Error", "Base class of every error Kiln raises.", PyExc_Exception, nullptr);
    m.attr("Error") = py::handle(base_error);
    struct spec {
        error_code code;
        const char* name;
        PyObject* builtin;
        const char* doc;
    };
    const spec specs[] = {
        {error_code::parse, "ParseError", PyExc_ValueError, "The model or file cannot be read (corrupt, truncated)."},
        {error_code::unsupported, "UnsupportedError", PyExc_NotImplementedError, "A valid model uses what Kiln lacks."},
        {error_code::shape, "ShapeError", PyExc_ValueError, "Shapes disagree (an op's inputs, a caller's input)."},
        {error_code::type, "TypeError", PyExc_TypeError, "Element types disagree."},
        {error_code::io, "IOError", PyExc_OSError, "A file cannot be opened, read or written."},
        {error_code::runtime, "RuntimeError", PyExc_RuntimeError, "Failure while running."},
        {error_code::out_of_memory, "OutOfMemoryError", PyExc_MemoryError, "An allocation failed."},
        {error_code::invalid_argument, "InvalidArgumentError", PyExc_ValueError,
         "API misuse: a missing or unknown input name, a bad option value."},
    };
    for (auto& s : specs) {
        std::string qualified = std::string("kiln.") + s.name;
        PyObject* bases = PyTuple_Pack(2, base_error, s.builtin);
        PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), s.doc, bases, nullptr);
        Py_DECREF(bases);
        PyObject_SetAttrString(cls, "code", PyLong_FromLong(static_cast<long>(s.code)));
        error_types()[s.code] = cls;
        m.attr(s.name) = py::handle(cls);
    }
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const kiln::error& e) {
            auto it = error_types().find(e.code());
            PyErr_SetString(it == error_types().end() ? base_error : it->second, e.what());
        }
    });
}

}  // namespace kiln::python
