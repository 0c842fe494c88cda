// The _kiln extension module; the package kiln/__init__.py re-exports it.
#include "bindings.hpp"

PYBIND11_MODULE(_kiln, m) {
    m.doc() = "Kiln: compile ONNX models and run them.";
    kiln::python::bind_errors(m);
    kiln::python::bind_shape(m);
    kiln::python::bind_argument(m);
    kiln::python::bind_dlpack(m);
    kiln::python::bind_program(m);
    kiln::python::bind_build(m);
#ifdef KILN_VERSION
    m.attr("__version__") = KILN_VERSION;
#endif
}
