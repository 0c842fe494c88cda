#include "bindings.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>
#include <kiln/shape.hpp>

#include <pybind11/stl.h>

namespace kiln::python {

void bind_shape(py::module_& m) {
    py::class_<dynamic_dimension>(m, "dynamic_dimension", "A dimension that may vary between runs.")
        .def(py::init([](std::size_t min, std::size_t max, std::vector<std::size_t> optimals, std::string symbol) {
                 dynamic_dimension d{min, max, {optimals.begin(), optimals.end()}};
                 if (!symbol.empty()) {
                     auto e = dim_expr::parse(symbol);
                     if (!e) throw_error(error_code::invalid_argument, "dynamic_dimension: symbol '" + symbol +
                                                                           "' is not a name or a sum of names");
                     d.symbol = e->to_string();
                 }
                 return d;
             }),
             py::arg("min"), py::arg("max"), py::arg("optimals") = std::vector<std::size_t>{},
             py::arg("symbol") = std::string(),
             "symbol: the dim's name ('batch') or an affine expression of names ('past + sequence'); "
             "dims with the same symbol are the same size in every run.")
        .def_readwrite("min", &dynamic_dimension::min)
        .def_readwrite("max", &dynamic_dimension::max)
        .def_readonly("symbol", &dynamic_dimension::symbol)
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
        .def(
            "lens",
            [](const shape& s) { return s.is_tensor() ? s.opt_lens() : s.lens(); },
            "The dimensions; for a dynamic shape the default one: each dim's first optimal size, else its min.")
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
