// kiln.argument <-> numpy without copies where the layout allows: a numpy array is
// borrowed (the argument keeps the array alive), and an argument exposes the buffer
// protocol, so np.asarray(arg) shares its memory.
#include "bindings.hpp"

#include <kiln/program.hpp>

#include <pybind11/stl.h>

namespace kiln::python {

py::dtype numpy_dtype(type t) {
    switch (t) {
        case type::bool_: return py::dtype("bool");
        case type::int8: return py::dtype("int8");
        case type::int16: return py::dtype("int16");
        case type::int32: return py::dtype("int32");
        case type::int64: return py::dtype("int64");
        case type::uint8: return py::dtype("uint8");
        case type::uint16: return py::dtype("uint16");
        case type::uint32: return py::dtype("uint32");
        case type::uint64: return py::dtype("uint64");
        case type::float16: return py::dtype("float16");
        case type::float32: return py::dtype("float32");
        case type::float64: return py::dtype("float64");
        // No numpy dtype: raw bit patterns, the kiln type stays on the argument.
        case type::bfloat16: return py::dtype("uint16");
        case type::int4:
        case type::int2: return py::dtype("int8");
        case type::float8e4m3fn:
        case type::float8e5m2:
        case type::float8e4m3fnuz:
        case type::float8e5m2fnuz:
        case type::float8e8m0:
        case type::float4e2m1:
        case type::uint4:
        case type::uint2: return py::dtype("uint8");
        case type::string: break;
    }
    throw_error(error_code::type, "element type " + std::string(type_name(t)) + " has no numpy dtype");
}

type type_from_dtype(const py::dtype& d, const std::string& what) {
    char kind = d.kind();
    auto size = d.itemsize();
    if (kind == 'b') return type::bool_;
    if (kind == 'f' && size == 2) return type::float16;
    if (kind == 'f' && size == 4) return type::float32;
    if (kind == 'f' && size == 8) return type::float64;
    if (kind == 'i' && size == 1) return type::int8;
    if (kind == 'i' && size == 2) return type::int16;
    if (kind == 'i' && size == 4) return type::int32;
    if (kind == 'i' && size == 8) return type::int64;
    if (kind == 'u' && size == 1) return type::uint8;
    if (kind == 'u' && size == 2) return type::uint16;
    if (kind == 'u' && size == 4) return type::uint32;
    if (kind == 'u' && size == 8) return type::uint64;
    throw_error(error_code::type, what + ": numpy dtype " + py::str(static_cast<const py::handle&>(d)).cast<std::string>() + " has no kiln element type");
}

argument argument_from_python(const py::handle& obj, const char* what, std::optional<type> as_type) {
    if (py::isinstance<argument>(obj)) {
        auto a = obj.cast<argument>();
        if (as_type && *as_type != a.get_shape().get_type())
            throw_error(error_code::type, std::string(what) + ": the argument is " +
                                              std::string(type_name(a.get_shape().get_type())));
        return a;
    }
    // Tensors of other frameworks (torch) come through DLPack, shared; numpy arrays below.
    if (!as_type && !py::isinstance<py::array>(obj) && py::hasattr(obj, "__dlpack__")) return argument_from_dlpack(obj);
    py::array arr = py::array::ensure(obj);
    if (!arr) throw_error(error_code::type, std::string(what) + ": expected a numpy array or kiln.argument");
    if (arr.dtype().kind() == 'U' || arr.dtype().kind() == 'O' || arr.dtype().kind() == 'S') {
        // Strings are copied into kiln's own string storage.
        auto flat = arr.attr("reshape")(-1).attr("tolist")().cast<std::vector<std::string>>();
        std::vector<std::size_t> lens(arr.shape(), arr.shape() + arr.ndim());
        return literal(shape(type::string, lens), flat).get_argument();
    }
    type t = type_from_dtype(arr.dtype(), what);
    if (as_type) {
        if (type_size(*as_type) != type_size(t))
            throw_error(error_code::type, std::string(what) + ": a " + std::to_string(arr.itemsize()) +
                                              "-byte numpy dtype cannot hold " + std::string(type_name(*as_type)));
        t = *as_type;
    }
    std::vector<std::size_t> lens, strides;
    bool borrowable = true;
    for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
        lens.push_back(static_cast<std::size_t>(arr.shape(i)));
        auto st = arr.strides(i);
        if (st < 0 || st % arr.itemsize() != 0) borrowable = false;
        strides.push_back(st < 0 ? 0 : static_cast<std::size_t>(st / arr.itemsize()));
    }
    if (!borrowable) {
        arr = py::array::ensure(obj, py::array::c_style | py::array::forcecast);
        strides = shape::standard_strides(lens);
    }
    shape s(t, lens, strides);
    // The argument keeps the array alive; the last release may happen on a thread
    // without the GIL (an eval worker), so the deleter takes it.
    auto* keep = new py::object(arr);
    std::shared_ptr<char> data(static_cast<char*>(const_cast<void*>(arr.data())), [keep](char*) {
        py::gil_scoped_acquire gil;
        delete keep;
    });
    return argument(s, std::move(data));
}

namespace {

// A host tensor's memory as a numpy buffer; a clear error for anything else.
py::buffer_info host_buffer(argument& a) {
    const auto& s = a.get_shape();
    if (!s.is_tensor() || s.get_type() == type::string || s.dynamic())
        throw_error(error_code::type, "a " + s.to_string() + " argument has no numpy view; use tolist()");
    if (a.location() != memory_location::host)
        throw_error(error_code::runtime, "the argument lives in device memory (torch.from_dlpack or "
                                         "__cuda_array_interface__ take it)");
    auto dt = numpy_dtype(s.get_type());
    std::vector<py::ssize_t> shape_v, strides_v;
    for (std::size_t i = 0; i < s.ndim(); ++i) {
        shape_v.push_back(static_cast<py::ssize_t>(s.lens()[i]));
        strides_v.push_back(static_cast<py::ssize_t>(s.strides()[i] * s.type_size()));
    }
    return py::buffer_info(a.data(), static_cast<py::ssize_t>(s.type_size()), std::string(1, dt.char_()),
                           static_cast<py::ssize_t>(s.ndim()), shape_v, strides_v);
}

// pybind11 (2.10) calls def_buffer's function from a C callback without catching: an
// exception there (a tuple, string or device argument has no buffer) would terminate the
// process. This wrapper turns it into a Python BufferError instead.
int buffer_or_error(PyObject* obj, Py_buffer* view, int flags) {
    try {
        return py::detail::pybind11_getbuffer(obj, view, flags);
    } catch (const std::exception& e) {
        if (view) view->obj = nullptr;
        PyErr_SetString(PyExc_BufferError, e.what());
        return -1;
    }
}

}  // namespace

void bind_argument(py::module_& m) {
    auto cls = py::class_<argument>(m, "argument", py::buffer_protocol(),
                         "A tensor's shape and data. Built from any numpy array without copying when its layout "
                         "allows; np.asarray(arg) shares the argument's memory.")
        .def(py::init([](const py::object& obj, std::optional<std::string> t) {
                 std::optional<type> as;
                 if (t) as = type_from_name(*t);
                 return argument_from_python(obj, "argument", as);
             }),
             py::arg("data"), py::arg("type") = py::none(),
             "argument(data, type=None): `type` reinterprets raw uint data as e.g. 'bfloat16' or 'float8e4m3fn'.")
        .def("get_shape", &argument::get_shape)
        .def("tolist", [](const argument& a) -> py::object {
            if (!a.get_shape().is_tensor()) {
                py::list l;
                for (auto& e : a.elements()) l.append(py::cast(e));
                return l;
            }
            if (a.get_shape().get_type() == type::string) return py::cast(a.to_vector<std::string>());
            py::array arr = py::array(py::cast(a));
            return arr.attr("tolist")();
        }, "The values as (nested) Python lists.")
        .def("elements", &argument::elements, "Elements of a tuple, sequence or optional.")
        .def("__eq__", [](const argument& a, const argument& b) { return a == b; })
        .def("__repr__", [](const argument& a) { return "kiln.argument(" + a.to_string() + ")"; })
        // numpy asks the buffer first; only when that fails (no host tensor) does it call
        // __array__, which then says why instead of numpy making an object array of it.
        .def("__array__", [](argument& a, const py::object&, const py::object&) { return py::array(host_buffer(a)); },
             py::arg("dtype") = py::none(), py::arg("copy") = py::none())
        .def_buffer([](argument& a) -> py::buffer_info { return host_buffer(a); });
    reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_as_buffer->bf_getbuffer = buffer_or_error;

    m.def("generate_argument", [](const shape& s, std::uint64_t seed) {
        argument a(s.as_standard());
        std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
        visit(a, [&](auto v) {
            using C = std::remove_reference_t<decltype(v[0])>;
            for (std::size_t i = 0; i < s.elements(); ++i) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                double u = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
                if constexpr (std::is_same_v<C, std::string>) v[i] = std::to_string(state % 10);
                else if constexpr (std::is_same_v<C, bool>) v[i] = u < 0.5;
                else if constexpr (std::is_floating_point_v<compute_t<C>>) v[i] = convert<C>(2.0 * u - 1.0);
                else v[i] = convert<C>(static_cast<int>(u * 4));
            }
        });
        return a;
    }, py::arg("shape"), py::arg("seed") = 0, "Seeded random data for a shape: floats in [-1, 1), integers in [0, 4).");
}

}  // namespace kiln::python
