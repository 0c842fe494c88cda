#include "bindings.hpp"

#include <kiln/shape.hpp>

#include <pybind11/stl.h>

namespace kiln::python {

void bind_shape(py::module_& m) {
    py::class_<dynamic_dimension>(m, "dynamic_dimension", "A dimension that may vary between runs.")
        .def(py::init([](std::size_t min, std::size_t max, std::vector<std::size_t> optimals) {
                 return dynamic_dimension{min, max, {optimals.begin(), optimals.end()}};
             }),
             py::arg("min"), py::arg("max"), py::arg("optimals") = std::vector<std::size_t>{})
        .def_readwrite("min", &dynamic_dimension::min)
        .def_readwrite("max", &dynamic_dimension::max)
        .def_property_readonly("optimals",
                               [](const dynamic_dimension& d) { return std::vector<std::size_t>(d.optimals.begin(), d.optimals.end()); })
        .def("is_fixed", &dynamic_dimension::is_fixed)
        .def("__eq__", [](const dynamic_dimension& a, const dynamic_dimension& b) { return a == b; })
        .def("__repr__", [](const dynamic_dimension& d) {
            std::ostringstream ss;
            ss << "kiln.dynamic_dimension(" << d << ")";
            return ss.str();
        });

    py::class_<shape>(m, "shape", "Element type, dimensions and strides of a tensor (or a tuple of shapes).")
        .def(py::init([](const std::string& t, std::vector<std::size_t> lens, std::optional<std::vector<std::size_t>> strides) {
                 if (strides) return shape(type_from_name(t), std::move(lens), std::move(*strides));
                 return shape(type_from_name(t), std::move(lens));
             }),
             py::arg("type"), py::arg("lens"), py::arg("strides") = py::none(),
             "shape(type, lens, strides=None): type is an element type name such as 'float32'.")
        .def("type", [](const shape& s) { return std::string(type_name(s.get_type())); }, "Element type name, e.g. 'float32'.")
        .def("lens", [](const shape& s) { return s.lens(); }, "The dimensions (static shapes).")
        .def("strides", [](const shape& s) { return s.strides(); }, "Strides in elements.")
        .def("elements", &shape::elements, "Number of elements.")
        .def("bytes", &shape::bytes, "Bytes the layout spans.")
        .def("type_size", &shape::type_size, "Bytes per element.")
        .def("ndim", &shape::ndim)
        .def("standard", &shape::standard, "Row-major, packed, not broadcast.")
        .def("packed", &shape::packed)
        .def("transposed", &shape::transposed)
        .def("broadcasted", &shape::broadcasted)
        .def("scalar", &shape::scalar)
        .def("dynamic", &shape::dynamic, "Whether any dimension may vary between runs.")
        .def("dyn_dims", &shape::to_dynamic_dims, "Every dimension as a dynamic_dimension (fixed ones have min == max).")
        .def("sub_shapes", &shape::sub_shapes, "Tuple elements, or the element shape of a sequence/optional.")
        .def("__eq__", [](const shape& a, const shape& b) { return a == b; })
        .def("__hash__", &shape::hash)
        .def("__str__", &shape::to_string)
        .def("__repr__", [](const shape& s) { return "kiln.shape(" + s.to_string() + ")"; });
}

}  // namespace kiln::python
