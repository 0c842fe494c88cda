// DLPack both ways, without copies: kiln.argument has __dlpack__ / __dlpack_device__ (so
// np.from_dlpack, torch.from_dlpack and torch.utils.dlpack take it), and kiln.from_dlpack (and
// every place that accepts an array, e.g. program.run) takes any object with __dlpack__, such as
// a CPU torch tensor. The structures are dlpack.h's (Debian's libdlpack-dev, DLPack 0.6).
#include "bindings.hpp"

#include <dlpack/dlpack.h>

#include <pybind11/stl.h>

#include <cstring>

namespace kiln::python {

namespace {

// kDLBool came with DLPack 0.8, after the header Debian ships; torch >= 1.12 uses it for bool.
constexpr std::uint8_t dl_bool_code = 6;
constexpr const char* capsule_name = "dltensor";
constexpr const char* used_capsule_name = "used_dltensor";

DLDataType dl_type_of(type t) {
    auto bits = static_cast<std::uint8_t>(type_size(t) * 8);
    switch (t) {
        case type::bool_: return {dl_bool_code, 8, 1};
        case type::int8: case type::int16: case type::int32: case type::int64: return {kDLInt, bits, 1};
        case type::uint8: case type::uint16: case type::uint32: case type::uint64: return {kDLUInt, bits, 1};
        case type::float16: case type::float32: case type::float64: return {kDLFloat, bits, 1};
        case type::bfloat16: return {kDLBfloat, 16, 1};
        default: break;
    }
    throw_error(error_code::type, "a " + std::string(type_name(t)) + " argument has no DLPack type");
}

type type_of_dl(const DLDataType& d) {
    if (d.lanes != 1) throw_error(error_code::type, "from_dlpack: vector types (lanes > 1) are not supported");
    switch (d.code) {
        case kDLInt:
            if (d.bits == 8) return type::int8;
            if (d.bits == 16) return type::int16;
            if (d.bits == 32) return type::int32;
            if (d.bits == 64) return type::int64;
            break;
        case kDLUInt:
            if (d.bits == 8) return type::uint8;
            if (d.bits == 16) return type::uint16;
            if (d.bits == 32) return type::uint32;
            if (d.bits == 64) return type::uint64;
            break;
        case kDLFloat:
            if (d.bits == 16) return type::float16;
            if (d.bits == 32) return type::float32;
            if (d.bits == 64) return type::float64;
            break;
        case kDLBfloat:
            if (d.bits == 16) return type::bfloat16;
            break;
        case dl_bool_code:
            if (d.bits == 8) return type::bool_;
            break;
        default: break;
    }
    throw_error(error_code::type, "from_dlpack: DLPack type code " + std::to_string(d.code) + " with " +
                                      std::to_string(d.bits) + " bits has no kiln element type");
}

// What a DLManagedTensor made from an argument owns: the argument (its memory stays alive) and
// the shape arrays the DLTensor points at.
struct exported {
    DLManagedTensor managed{};
    argument keep;
    std::vector<std::int64_t> lens, strides;
};

py::capsule to_dlpack(const argument& a) {
    const auto& s = a.get_shape();
    if (!s.is_tensor() || s.dynamic() || s.get_type() == type::string)
        throw_error(error_code::type, "a " + s.to_string() + " argument cannot be exported through DLPack");
    if (a.location() != memory_location::host)
        throw_error(error_code::runtime, "__dlpack__: the argument lives in device memory");
    auto* e = new exported;
    e->keep = a;
    for (std::size_t i = 0; i < s.ndim(); ++i) {
        e->lens.push_back(static_cast<std::int64_t>(s.lens()[i]));
        e->strides.push_back(static_cast<std::int64_t>(s.strides()[i]));
    }
    DLTensor& t = e->managed.dl_tensor;
    t.data = a.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<std::int32_t>(s.ndim());
    t.dtype = dl_type_of(s.get_type());
    t.shape = e->lens.data();
    t.strides = e->strides.data();
    t.byte_offset = 0;
    e->managed.manager_ctx = e;
    e->managed.deleter = [](DLManagedTensor* m) { delete static_cast<exported*>(m->manager_ctx); };
    // A capsule nobody consumed still owns the tensor; a consumer renames it and calls the deleter.
    return py::capsule(&e->managed, capsule_name, [](PyObject* cap) {
        if (!PyCapsule_IsValid(cap, capsule_name)) return;
        auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, capsule_name));
        if (m && m->deleter) m->deleter(m);
    });
}

}  // namespace

argument argument_from_dlpack(const py::handle& obj) {
    py::object cap_obj = obj.attr("__dlpack__")();
    PyObject* cap = cap_obj.ptr();
    if (!PyCapsule_IsValid(cap, capsule_name))
        throw_error(error_code::type, "from_dlpack: __dlpack__ did not return an unused 'dltensor' capsule");
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, capsule_name));
    const DLTensor& t = m->dl_tensor;
    if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost)
        throw_error(error_code::unsupported, "from_dlpack: only CPU tensors can be taken (device type " +
                                                 std::to_string(t.device.device_type) + ")");
    type et = type_of_dl(t.dtype);
    std::vector<std::size_t> lens, strides;
    for (std::int32_t i = 0; i < t.ndim; ++i) {
        if (t.shape[i] < 0) throw_error(error_code::shape, "from_dlpack: negative dimension");
        lens.push_back(static_cast<std::size_t>(t.shape[i]));
    }
    if (t.strides) {
        for (std::int32_t i = 0; i < t.ndim; ++i) {
            if (t.strides[i] < 0) throw_error(error_code::unsupported, "from_dlpack: negative strides are not supported");
            strides.push_back(static_cast<std::size_t>(t.strides[i]));
        }
    } else {
        strides = shape::standard_strides(lens);  // NULL strides: row-major
    }
    // Consumed: from now on the deleter is ours to call, when kiln lets go of the memory.
    PyCapsule_SetName(cap, used_capsule_name);
    std::shared_ptr<char> data(static_cast<char*>(t.data) + t.byte_offset, [m](char*) {
        if (m->deleter) {
            py::gil_scoped_acquire gil;  // the producer's deleter may touch Python objects
            m->deleter(m);
        }
    });
    return argument(shape(et, lens, strides), std::move(data));
}

void bind_dlpack(py::module_& m) {
    auto cls = py::reinterpret_borrow<py::class_<argument>>(py::type::of<argument>());
    cls.def("__dlpack__", [](const argument& a, const py::object& stream) {
           if (!stream.is_none() && !(py::isinstance<py::int_>(stream) && stream.cast<long long>() == -1))
               throw_error(error_code::invalid_argument, "__dlpack__: a host argument takes no stream");
           return to_dlpack(a);
       }, py::arg("stream") = py::none(), "A DLPack capsule sharing this argument's memory (no copy).")
        .def("__dlpack_device__", [](const argument&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); });
    m.def("from_dlpack", [](const py::object& obj) { return argument_from_dlpack(obj); }, py::arg("tensor"),
          "A kiln.argument sharing the memory of any object with __dlpack__ (a CPU torch tensor, a numpy "
          "array): no copy; the producer's memory stays alive while kiln uses it.");
}

}  // namespace kiln::python
