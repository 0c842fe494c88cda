// DLPack both ways, without copies: kiln.argument has __dlpack__ / __dlpack_device__ (so
// np.from_dlpack, torch.from_dlpack and torch.utils.dlpack take it), and kiln.from_dlpack (and
// every place that accepts an array, e.g. program.run) takes any object with __dlpack__, such as
// a CPU torch tensor. The structures are dlpack.h's (Debian's libdlpack-dev, DLPack 0.6).
//
// CUDA tensors too (the gpu target with offload_copy off): a kDLCUDA tensor becomes a device
// argument on its device, and a device argument (such a program's result) exports as kDLCUDA
// and through __cuda_array_interface__. Streams: Kiln asks the producer for the data on the
// legacy default stream (`__dlpack__(stream=1)`), and the gpu target orders each eval of a
// program without offload_copy after that stream (gpu_context::begin_run); results come back
// after the eval's stream is done, so any consumer stream may read them at once.
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
    auto* e = new exported;
    e->keep = a;
    for (std::size_t i = 0; i < s.ndim(); ++i) {
        e->lens.push_back(static_cast<std::int64_t>(s.lens()[i]));
        e->strides.push_back(static_cast<std::int64_t>(s.strides()[i]));
    }
    DLTensor& t = e->managed.dl_tensor;
    t.data = a.data();
    t.device = a.location() == memory_location::device ? DLDevice{kDLCUDA, a.device_id()} : DLDevice{kDLCPU, 0};
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
    // A CUDA producer is asked for its data ready on the legacy default stream (1), which
    // the gpu target waits for; a CPU producer takes no stream.
    bool cuda = false;
    if (py::hasattr(obj, "__dlpack_device__")) {
        auto dev = obj.attr("__dlpack_device__")().cast<py::tuple>();
        cuda = dev.size() >= 1 && dev[0].cast<int>() == kDLCUDA;
    }
    py::object cap_obj = cuda ? obj.attr("__dlpack__")(py::arg("stream") = 1) : obj.attr("__dlpack__")();
    PyObject* cap = cap_obj.ptr();
    if (!PyCapsule_IsValid(cap, capsule_name))
        throw_error(error_code::type, "from_dlpack: __dlpack__ did not return an unused 'dltensor' capsule");
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, capsule_name));
    const DLTensor& t = m->dl_tensor;
    if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost && t.device.device_type != kDLCUDA)
        throw_error(error_code::unsupported, "from_dlpack: only CPU and CUDA tensors can be taken (device type " +
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
    if (t.device.device_type == kDLCUDA)
        return argument::adopt(shape(et, lens, strides), std::move(data), memory_location::device, t.device.device_id);
    return argument(shape(et, lens, strides), std::move(data));
}

namespace {

// __cuda_array_interface__ (version 3) of a device argument: shape, typestr, data pointer,
// strides in bytes; no stream (the eval that made it has finished).
py::dict cuda_array_interface(const argument& a) {
    if (a.location() != memory_location::device)
        throw py::attribute_error("__cuda_array_interface__: the argument lives in host memory");
    const auto& s = a.get_shape();
    if (!s.is_tensor() || s.dynamic() || s.get_type() == type::string)
        throw py::attribute_error("__cuda_array_interface__: a " + s.to_string() + " argument has none");
    const DLDataType dt = dl_type_of(s.get_type());
    char kind = 0;
    if (dt.code == kDLFloat) kind = 'f';
    else if (dt.code == kDLInt) kind = 'i';
    else if (dt.code == kDLUInt) kind = 'u';
    else if (dt.code == dl_bool_code) kind = 'b';
    else throw py::attribute_error("__cuda_array_interface__: " + std::string(type_name(s.get_type())) + " has no typestr");
    py::list lens, strides;
    for (std::size_t i = 0; i < s.ndim(); ++i) {
        lens.append(s.lens()[i]);
        strides.append(s.strides()[i] * s.type_size());
    }
    py::dict d;
    d["shape"] = py::tuple(lens);
    d["typestr"] = std::string("<") + kind + std::to_string(s.type_size());
    d["data"] = py::make_tuple(reinterpret_cast<std::uintptr_t>(a.data()), false);
    d["strides"] = py::tuple(strides);
    d["version"] = 3;
    d["stream"] = py::none();
    return d;
}

}  // namespace

void bind_dlpack(py::module_& m) {
    auto cls = py::reinterpret_borrow<py::class_<argument>>(py::type::of<argument>());
    cls.def("__dlpack__", [](const argument& a, const py::object& stream) {
           // A device argument's eval has finished: ready on any stream the consumer names.
           if (a.location() == memory_location::host && !stream.is_none() &&
               !(py::isinstance<py::int_>(stream) && stream.cast<long long>() == -1))
               throw_error(error_code::invalid_argument, "__dlpack__: a host argument takes no stream");
           return to_dlpack(a);
       }, py::arg("stream") = py::none(), "A DLPack capsule sharing this argument's memory (no copy).")
        .def("__dlpack_device__", [](const argument& a) {
            if (a.location() == memory_location::device) return py::make_tuple(static_cast<int>(kDLCUDA), a.device_id());
            return py::make_tuple(static_cast<int>(kDLCPU), 0);
        })
        .def_property_readonly("__cuda_array_interface__", &cuda_array_interface,
                               "A device argument's CUDA array interface (v3), for CuPy, Numba, torch.as_tensor")
        .def_property_readonly("location", [](const argument& a) {
            return std::string(a.location() == memory_location::device ? "device" : "host");
        }, "'host', or 'device' (CUDA memory: a gpu program's result with offload_copy off, a CUDA tensor)")
        .def_property_readonly("device_id", &argument::device_id, "The CUDA device of a device argument.");
    m.def("from_dlpack", [](const py::object& obj) { return argument_from_dlpack(obj); }, py::arg("tensor"),
          "A kiln.argument sharing the memory of any object with __dlpack__ (a CPU or CUDA torch tensor, a "
          "numpy array): no copy; the producer's memory stays alive while kiln uses it.");
}

}  // namespace kiln::python
