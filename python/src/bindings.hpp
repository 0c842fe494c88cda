// The pieces of the _kiln extension module, one file each.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/errors.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

namespace kiln::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_shape(py::module_& m);
void bind_argument(py::module_& m);
void bind_program(py::module_& m);
// The IR build API (kiln.op, kiln.module, program.get_main_module); after bind_program.
void bind_build(py::module_& m);
// DLPack: argument.__dlpack__, kiln.from_dlpack; after bind_argument.
void bind_dlpack(py::module_& m);

// numpy <-> argument. `as_type` overrides the element type (bf16/fp8 from raw uint views).
argument argument_from_python(const py::handle& obj, const char* what, std::optional<type> as_type = std::nullopt);
py::dtype numpy_dtype(type t);
// An argument sharing the memory of an object with __dlpack__ (a torch tensor), no copy.
argument argument_from_dlpack(const py::handle& obj);
// The kiln element type matching a numpy dtype (throws kiln type error when none does).
type type_from_dtype(const py::dtype& d, const std::string& what);

}  // namespace kiln::python
