// kiln_onnx_options, kiln_compile_options and kiln_file_options: setters over the C++
// option structs. A setter checks its values and changes nothing when it fails.
#include "handles.hpp"

#include <kiln/dim_expr.hpp>

using namespace kiln::capi;

namespace {

std::vector<std::size_t> to_vector(const size_t* data, size_t count, const char* what) {
    if (count > 0) need(data, what);
    return std::vector<std::size_t>(data, data + count);
}

kiln::dynamic_dimension make_dim(size_t min, size_t max, std::vector<std::size_t> optimals) {
    if (min > max) invalid("a dimension's min " + std::to_string(min) + " is above its max " + std::to_string(max));
    kiln::dynamic_dimension d{min, max, {}};
    for (auto o : optimals) {
        if (!d.contains(o))
            invalid("optimal " + std::to_string(o) + " lies outside the range " + std::to_string(min) + ".." +
                    std::to_string(max));
        d.optimals.insert(o);
    }
    return d;
}

}  // namespace

extern "C" {

kiln_status kiln_onnx_options_create(kiln_onnx_options* out) {
    return guarded(__func__, [&] {
        need(out, "out");
        *out = new kiln_onnx_options_t;
    });
}

kiln_status kiln_onnx_options_destroy(kiln_onnx_options options) {
    return guarded(__func__, [&] { destroy(options, "options"); });
}

kiln_status kiln_onnx_options_set_default_dim_value(kiln_onnx_options options, size_t value) {
    return guarded(__func__, [&] { get(options, "options").options.default_dim_value = value; });
}

kiln_status kiln_onnx_options_set_default_dyn_dim_value(kiln_onnx_options options, size_t min, size_t max,
                                                        const size_t* optimals, size_t optimal_count) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        o.options.default_dyn_dim_value = make_dim(min, max, to_vector(optimals, optimal_count, "optimals"));
    });
}

kiln_status kiln_onnx_options_set_input_dims(kiln_onnx_options options, const char* input, const size_t* dims,
                                             size_t ndim) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        o.options.map_input_dims[need(input, "input")] = to_vector(dims, ndim, "dims");
    });
}

kiln_status kiln_onnx_options_set_dyn_input_dims(kiln_onnx_options options, const char* input, const size_t* mins,
                                                 const size_t* maxs, size_t ndim) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        need(input, "input");
        auto lo = to_vector(mins, ndim, "mins"), hi = to_vector(maxs, ndim, "maxs");
        std::vector<kiln::dynamic_dimension> dims;
        for (size_t i = 0; i < ndim; ++i) dims.push_back(make_dim(lo[i], hi[i], {}));
        o.options.map_dyn_input_dims[input] = std::move(dims);
    });
}

namespace {
// Dim `dim` of the ranges set for `input` by kiln_onnx_options_set_dyn_input_dims.
kiln::dynamic_dimension& dyn_dim_of(kiln_onnx_options_t& o, const char* input, size_t dim) {
    auto it = o.options.map_dyn_input_dims.find(need(input, "input"));
    if (it == o.options.map_dyn_input_dims.end())
        invalid(std::string("no dynamic dims were set for input '") + input +
                "' (kiln_onnx_options_set_dyn_input_dims first)");
    if (dim >= it->second.size())
        invalid("input '" + std::string(input) + "' has " + std::to_string(it->second.size()) + " dims, no dim " +
                std::to_string(dim));
    return it->second[dim];
}
}  // namespace

kiln_status kiln_onnx_options_set_dyn_input_dim_optimals(kiln_onnx_options options, const char* input, size_t dim,
                                                         const size_t* optimals, size_t count) {
    return guarded(__func__, [&] {
        auto& d = dyn_dim_of(get(options, "options"), input, dim);
        auto symbol = d.symbol;  // set before or after the optimals
        d = make_dim(d.min, d.max, to_vector(optimals, count, "optimals"));
        d.symbol = symbol;
    });
}

kiln_status kiln_onnx_options_set_dyn_input_dim_symbol(kiln_onnx_options options, const char* input, size_t dim,
                                                       const char* symbol) {
    return guarded(__func__, [&] {
        auto& d = dyn_dim_of(get(options, "options"), input, dim);
        auto e = kiln::dim_expr::parse(need(symbol, "symbol"));
        if (!e) invalid(std::string("symbol '") + symbol + "' is not a name or a sum of names (\"batch\", \"past + sequence\")");
        d.symbol = e->to_string();
    });
}

kiln_status kiln_onnx_options_set_skip_unknown_operators(kiln_onnx_options options, int skip) {
    return guarded(__func__, [&] { get(options, "options").options.skip_unknown_operators = skip != 0; });
}

kiln_status kiln_onnx_options_set_max_loop_iterations(kiln_onnx_options options, size_t iterations) {
    return guarded(__func__, [&] { get(options, "options").options.max_loop_iterations = iterations; });
}

kiln_status kiln_onnx_options_set_limit_max_iterations(kiln_onnx_options options, int limit) {
    return guarded(__func__, [&] { get(options, "options").options.limit_max_iterations = limit != 0; });
}

kiln_status kiln_onnx_options_set_external_data_path(kiln_onnx_options options, const char* path) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        o.options.external_data_path = need(path, "path");
    });
}

kiln_status kiln_compile_options_create(kiln_compile_options* out) {
    return guarded(__func__, [&] {
        need(out, "out");
        *out = new kiln_compile_options_t;
    });
}

kiln_status kiln_compile_options_destroy(kiln_compile_options options) {
    return guarded(__func__, [&] { destroy(options, "options"); });
}

kiln_status kiln_compile_options_set_offload_copy(kiln_compile_options options, int offload_copy) {
    return guarded(__func__, [&] { get(options, "options").options.offload_copy = offload_copy != 0; });
}

kiln_status kiln_compile_options_set_device_id(kiln_compile_options options, int device_id) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        if (device_id < 0) invalid("device_id " + std::to_string(device_id) + " is negative");
        o.options.device_id = device_id;
    });
}

kiln_status kiln_compile_options_set_tf32(kiln_compile_options options, int tf32) {
    return guarded(__func__, [&] { get(options, "options").options.tf32 = tf32 != 0; });
}

kiln_status kiln_compile_options_set_gpu_arch(kiln_compile_options options, const char* arch) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        if (!arch) invalid("arch is NULL (\"\" for the default)");
        o.options.gpu_arch = arch;
    });
}

kiln_status kiln_compile_options_set_fast_math(kiln_compile_options options, int fast_math) {
    return guarded(__func__, [&] { get(options, "options").options.fast_math = fast_math != 0; });
}

kiln_status kiln_compile_options_set_exhaustive_tune(kiln_compile_options options, int exhaustive_tune) {
    return guarded(__func__, [&] { get(options, "options").options.exhaustive_tune = exhaustive_tune != 0; });
}

kiln_status kiln_compile_options_set_threads(kiln_compile_options options, size_t threads) {
    return guarded(__func__, [&] { get(options, "options").options.threads = threads; });
}

kiln_status kiln_compile_options_set_max_specializations(kiln_compile_options options, size_t count) {
    return guarded(__func__, [&] { get(options, "options").options.max_specializations = count; });
}

kiln_status kiln_compile_options_set_specialize_after(kiln_compile_options options, size_t calls) {
    return guarded(__func__, [&] { get(options, "options").options.specialize_after = calls; });
}

kiln_status kiln_compile_options_add_dynamic_buckets(kiln_compile_options options, const char* dim, const size_t* sizes,
                                                     size_t count) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        need(dim, "dim");
        if (count == 0) invalid("no bucket sizes for dim '" + std::string(dim) + "'");
        o.options.dynamic_buckets.push_back({dim, to_vector(sizes, count, "sizes")});
    });
}

kiln_status kiln_file_options_create(kiln_file_options* out) {
    return guarded(__func__, [&] {
        need(out, "out");
        *out = new kiln_file_options_t;
    });
}

kiln_status kiln_file_options_destroy(kiln_file_options options) {
    return guarded(__func__, [&] { destroy(options, "options"); });
}

kiln_status kiln_file_options_set_device_id(kiln_file_options options, int device_id) {
    return guarded(__func__, [&] {
        auto& o = get(options, "options");
        if (device_id < 0) invalid("device_id " + std::to_string(device_id) + " is negative");
        o.options.device_id = device_id;
    });
}

}  // extern "C"
