// kiln_shape, kiln_argument and kiln_arguments.
#include "handles.hpp"

#include <cstring>

using namespace kiln::capi;
using kiln::error_code;
using kiln::throw_error;

namespace kiln::capi {

kiln_shape new_shape(const kiln::shape& s) {
    auto h = std::make_unique<kiln_shape_t>();
    h->shape = s;
    h->text = s.to_string();
    if (s.is_tensor()) {
        // A dynamic shape has no lens of its own: hand out the default ones, which is
        // what code written for static models sizes its input from.
        h->lens = s.dynamic() ? s.opt_lens() : s.lens();
        h->strides = s.dynamic() ? kiln::shape::standard_strides(h->lens) : s.strides();
        h->dims = s.to_dynamic_dims();
        for (auto& d : h->dims) h->optimals.emplace_back(d.optimals.begin(), d.optimals.end());
    }
    return h.release();
}

}  // namespace kiln::capi

namespace {

const kiln::dynamic_dimension& dim_of(const kiln_shape_t& s, size_t dim) {
    if (dim >= s.dims.size())
        invalid("dim " + std::to_string(dim) + " of " + s.text + ", which has " + std::to_string(s.dims.size()));
    return s.dims[dim];
}

// The shape of memory a caller hands over: a static tensor of a fixed-size type, and
// `size` bytes exactly (a mismatch is the usual sign of a wrong shape or type).
void check_memory(const kiln::shape& s, size_t size) {
    if (!s.is_tensor() || s.dynamic()) invalid(s.to_string() + " is not a static tensor shape");
    if (s.get_type() == kiln::type::string)
        throw_error(error_code::unsupported, "string tensors cannot cross the C API");
    if (size != s.bytes())
        invalid(std::to_string(size) + " bytes given for " + s.to_string() + ", which takes " +
                std::to_string(s.bytes()));
}

const kiln::argument& tensor_of(kiln_argument a, const char* what) {
    auto& arg = get(a, what).argument;
    const auto& s = arg.get_shape();
    if (!s.is_tensor() || s.dynamic() || (arg.data() == nullptr && s.elements() > 0))
        invalid(std::string("'") + what + "' holds " + s.to_string() + ", not a tensor with memory");
    return arg;
}

kiln_argument new_argument(kiln::argument a) {
    auto h = std::make_unique<kiln_argument_t>();
    h->argument = std::move(a);
    return h.release();
}

}  // namespace

extern "C" {

kiln_status kiln_shape_create(kiln_type type, const size_t* lens, size_t ndim, const size_t* strides, kiln_shape* out) {
    return guarded(__func__, [&] {
        need(out, "out");
        if (ndim > 0) need(lens, "lens");
        std::vector<std::size_t> l(lens, lens + ndim);
        auto t = to_type(type);
        *out = new_shape(strides ? kiln::shape(t, l, std::vector<std::size_t>(strides, strides + ndim))
                                 : kiln::shape(t, l));
    });
}

kiln_status kiln_shape_destroy(kiln_shape shape) {
    return guarded(__func__, [&] { destroy(shape, "shape"); });
}

kiln_status kiln_shape_kind_of(kiln_shape shape, kiln_shape_kind* kind) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        *need(kind, "kind") = static_cast<kiln_shape_kind>(s.shape.get_kind());
    });
}

kiln_status kiln_shape_type(kiln_shape shape, kiln_type* type) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        need(type, "type");
        if (s.shape.is_tuple()) invalid(s.text + " is a tuple: it has no element type");
        *type = from_type(s.shape.get_type());
    });
}

kiln_status kiln_shape_lens(kiln_shape shape, const size_t** lens, size_t* ndim) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        need(lens, "lens"), need(ndim, "ndim");
        *lens = s.lens.data(), *ndim = s.lens.size();
    });
}

kiln_status kiln_shape_strides(kiln_shape shape, const size_t** strides, size_t* ndim) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        need(strides, "strides"), need(ndim, "ndim");
        *strides = s.strides.data(), *ndim = s.strides.size();
    });
}

kiln_status kiln_shape_is_dynamic(kiln_shape shape, int* dynamic) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        *need(dynamic, "dynamic") = s.shape.dynamic() ? 1 : 0;
    });
}

kiln_status kiln_shape_dyn_dim(kiln_shape shape, size_t dim, size_t* min, size_t* max) {
    return guarded(__func__, [&] {
        auto& d = dim_of(get(shape, "shape"), dim);
        need(min, "min"), need(max, "max");
        *min = d.min, *max = d.max;
    });
}

kiln_status kiln_shape_dyn_dim_optimals(kiln_shape shape, size_t dim, const size_t** optimals, size_t* count) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        dim_of(s, dim);
        need(optimals, "optimals"), need(count, "count");
        *optimals = s.optimals[dim].data(), *count = s.optimals[dim].size();
    });
}

kiln_status kiln_shape_dyn_dim_symbol(kiln_shape shape, size_t dim, const char** symbol) {
    return guarded(__func__, [&] {
        auto& d = dim_of(get(shape, "shape"), dim);
        *need(symbol, "symbol") = d.symbol.c_str();
    });
}

kiln_status kiln_shape_elements(kiln_shape shape, size_t* elements) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        need(elements, "elements");
        if (!s.shape.is_tensor() || s.shape.dynamic()) invalid(s.text + " is not a static tensor shape");
        *elements = s.shape.elements();
    });
}

kiln_status kiln_shape_bytes(kiln_shape shape, size_t* bytes) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        need(bytes, "bytes");
        if (!s.shape.is_tensor() || s.shape.dynamic()) invalid(s.text + " is not a static tensor shape");
        *bytes = s.shape.bytes();
    });
}

kiln_status kiln_shape_to_string(kiln_shape shape, const char** text) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape");
        *need(text, "text") = s.text.c_str();
    });
}

kiln_status kiln_argument_create(kiln_shape shape, const void* data, size_t size, kiln_argument* out) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape").shape;
        need(out, "out");
        check_memory(s, size);
        kiln::argument a(s);  // zero-filled
        if (data != nullptr && size > 0) std::memcpy(a.data(), data, size);
        *out = new_argument(std::move(a));
    });
}

kiln_status kiln_argument_wrap(kiln_shape shape, void* data, size_t size, kiln_argument* out) {
    return guarded(__func__, [&] {
        auto& s = get(shape, "shape").shape;
        need(out, "out");
        check_memory(s, size);
        if (size > 0) need(data, "data");
        *out = new_argument(kiln::argument::borrow(s, data));
    });
}

kiln_status kiln_argument_destroy(kiln_argument argument) {
    return guarded(__func__, [&] { destroy(argument, "argument"); });
}

kiln_status kiln_argument_shape(kiln_argument argument, kiln_shape* out) {
    return guarded(__func__, [&] {
        auto& a = get(argument, "argument");
        need(out, "out");
        *out = new_shape(a.argument.get_shape());
    });
}

kiln_status kiln_argument_data(kiln_argument argument, void** data) {
    return guarded(__func__, [&] {
        auto& a = tensor_of(argument, "argument");
        *need(data, "data") = a.data();
    });
}

kiln_status kiln_argument_copy_to(kiln_argument argument, void* dest, size_t size) {
    return guarded(__func__, [&] {
        auto& a = tensor_of(argument, "argument");
        auto standard = a.get_shape().as_standard();
        check_memory(standard, size);
        if (size > 0) a.copy_to(kiln::argument::borrow(standard, need(dest, "dest")));
    });
}

kiln_status kiln_argument_read_tensor_proto(const char* path, kiln_argument* out) {
    return guarded(__func__, [&] {
        need(path, "path"), need(out, "out");
        *out = new_argument(kiln::read_tensor_proto(path));
    });
}

kiln_status kiln_argument_write_tensor_proto(kiln_argument argument, const char* name, const char* path) {
    return guarded(__func__, [&] {
        auto& a = get(argument, "argument");
        need(name, "name"), need(path, "path");
        kiln::write_value_proto(a.argument, name, path);
    });
}

namespace {
// A tuple's, sequence's or optional's elements; a tensor has none to give.
const std::vector<kiln::argument>& elements_of(kiln_argument argument) {
    auto& a = get(argument, "argument").argument;
    if (a.get_shape().is_tensor())
        invalid("'argument' holds the tensor " + a.get_shape().to_string() +
                ", not a tuple, sequence or optional (kiln_argument_data gives a tensor's memory)");
    return a.elements();
}
}  // namespace

kiln_status kiln_argument_element_count(kiln_argument argument, size_t* count) {
    return guarded(__func__, [&] {
        need(count, "count");
        *count = elements_of(argument).size();
    });
}

kiln_status kiln_argument_element(kiln_argument argument, size_t index, kiln_argument* out) {
    return guarded(__func__, [&] {
        need(out, "out");
        const auto& e = elements_of(argument);
        if (index >= e.size())
            invalid("index " + std::to_string(index) + " is out of range: the argument has " + std::to_string(e.size()) +
                    " elements");
        *out = new_argument(e[index]);
    });
}

kiln_status kiln_arguments_destroy(kiln_arguments arguments) {
    return guarded(__func__, [&] { destroy(arguments, "arguments"); });
}

kiln_status kiln_arguments_size(kiln_arguments arguments, size_t* size) {
    return guarded(__func__, [&] {
        auto& list = get(arguments, "arguments");
        *need(size, "size") = list.items.size();
    });
}

kiln_status kiln_arguments_get(kiln_arguments arguments, size_t index, kiln_argument* out) {
    return guarded(__func__, [&] {
        auto& list = get(arguments, "arguments");
        need(out, "out");
        if (index >= list.items.size())
            invalid("index " + std::to_string(index) + " of " + std::to_string(list.items.size()) + " arguments");
        *out = new_argument(list.items[index]);
    });
}

}  // extern "C"
