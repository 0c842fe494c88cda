#include "serve/infer.hpp"

#include "serve/batcher.hpp"
#include "serve/datatype.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

namespace kiln::serve {

namespace {

using clock_type = std::chrono::steady_clock;

std::uint64_t ns_since(clock_type::time_point t) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t).count());
}

std::string shape_text(const std::vector<std::int64_t>& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

[[noreturn]] void bad(const std::string& message) { fail(error_kind::bad_request, message); }

// Kiln's errors from eval: what the caller sent (shape, type, argument) is a 400; running
// out of memory is the server's state (503); anything else is Kiln's fault.
[[noreturn]] void rethrow_eval_error(const std::string& model, const kiln::error& e) {
    switch (e.code()) {
        case error_code::shape:
        case error_code::type:
        case error_code::invalid_argument: bad("model '" + model + "': " + e.message());
        case error_code::out_of_memory: fail(error_kind::unavailable, "model '" + model + "': " + e.message());
        default: fail(error_kind::internal, "model '" + model + "': " + e.what());
    }
}

// A tensor holding a copy of raw bytes (validated: exactly the shape's). argument(shape)
// would zero the buffer first, only for the copy to overwrite it: that fill was half the
// server's time taking a 602 KB input in. The 64-byte rounding is zeroed as there.
argument copy_of(const shape& s, std::string_view raw) {
    const std::size_t rounded = std::max<std::size_t>(64, (raw.size() + 63) / 64 * 64);
    auto* p = static_cast<char*>(std::aligned_alloc(64, rounded));
    if (!p) fail(error_kind::unavailable, "out of memory: cannot allocate " + std::to_string(raw.size()) + " bytes");
    if (!raw.empty()) std::memcpy(p, raw.data(), raw.size());
    std::memset(p + raw.size(), 0, rounded - raw.size());
    return argument(s, std::shared_ptr<char>(p, [](char* q) { std::free(q); }));
}

}  // namespace

std::size_t checked_elements(const std::string& input, const std::vector<std::int64_t>& shape) {
    std::size_t n = 1;
    for (auto d : shape) {
        if (d < 0) bad("input '" + input + "': shape " + shape_text(shape) + " has a negative dimension");
        auto u = static_cast<std::size_t>(d);
        if (u != 0 && n > std::numeric_limits<std::size_t>::max() / u)
            bad("input '" + input + "': shape " + shape_text(shape) + " is too large");
        n *= u;
    }
    return n;
}

void validate(const loaded_model& m, const infer_request& r) {
    std::set<std::string> seen;
    for (auto& in : r.inputs) {
        const auto* spec = m.find_input(in.name);
        if (!spec) bad("model '" + m.name + "' has no input '" + in.name + "'");
        if (!seen.insert(in.name).second) bad("input '" + in.name + "' is given twice");
        auto t = type_of_datatype(in.datatype);
        if (!t) bad("input '" + in.name + "': unknown datatype '" + in.datatype + "'");
        if (*t != spec->element_type)
            bad("input '" + in.name + "': datatype " + in.datatype + ", the model expects " +
                datatype_of(spec->element_type));
        auto elements = checked_elements(in.name, in.shape);
        const auto expected = shape_text(spec->protocol_shape());
        if (in.shape.size() != spec->dims.size())
            bad("input '" + in.name + "': shape " + shape_text(in.shape) + " has rank " + std::to_string(in.shape.size()) +
                ", the model expects " + expected);
        for (std::size_t i = 0; i < in.shape.size(); ++i) {
            auto d = static_cast<std::size_t>(in.shape[i]);
            if (!spec->dims[i].contains(d))
                bad("input '" + in.name + "': dimension " + std::to_string(i) + " is " + std::to_string(d) +
                    ", the model takes " +
                    (spec->dims[i].is_fixed() ? std::to_string(spec->dims[i].min)
                                              : std::to_string(spec->dims[i].min) + " to " + std::to_string(spec->dims[i].max)) +
                    " (shape " + expected + ")");
        }
        if (m.config.max_batch_size && !in.shape.empty() && static_cast<std::size_t>(in.shape[0]) > m.config.max_batch_size)
            bad("input '" + in.name + "': batch " + std::to_string(in.shape[0]) + " exceeds max_batch_size " +
                std::to_string(m.config.max_batch_size));
        auto size = type_size(*t);
        if (elements > std::numeric_limits<std::size_t>::max() / size) bad("input '" + in.name + "' is too large");
        if (in.data.is_raw) {
            if (in.data.raw.size() != elements * size)
                bad("input '" + in.name + "': " + std::to_string(in.data.raw.size()) + " bytes of data, shape " +
                    shape_text(in.shape) + " of " + in.datatype + " needs " + std::to_string(elements * size));
            // A C++ bool may only hold 0 or 1: any other byte would be undefined behaviour in
            // the kernels and the response (found by the serve fuzzer).
            if (*t == type::bool_)
                for (std::size_t i = 0; i < in.data.raw.size(); ++i)
                    if (static_cast<unsigned char>(in.data.raw[i]) > 1)
                        bad("input '" + in.name + "': BOOL data must be bytes 0 or 1, byte " + std::to_string(i) +
                            " is " + std::to_string(static_cast<unsigned char>(in.data.raw[i])));
        } else if (in.data.count != elements) {
            bad("input '" + in.name + "': " + std::to_string(in.data.count) + " values, shape " + shape_text(in.shape) +
                " needs " + std::to_string(elements));
        }
    }
    for (auto& spec : m.inputs)
        if (!spec.optional && !seen.count(spec.name)) bad("model '" + m.name + "': input '" + spec.name + "' is missing");
    for (auto& o : r.outputs)
        if (!m.find_output(o.name)) bad("model '" + m.name + "' has no output '" + o.name + "'");
}

param_map make_params(const loaded_model& m, const infer_request& r) {
    validate(m, r);
    param_map params;
    for (auto& in : r.inputs) {
        std::vector<std::size_t> lens(in.shape.begin(), in.shape.end());
        shape s(m.find_input(in.name)->element_type, lens);
        if (in.data.is_raw) {
            params[in.name] = in.data.raw_owner && reinterpret_cast<std::uintptr_t>(in.data.raw.data()) % 64 == 0
                                  ? argument(s, std::shared_ptr<char>(std::const_pointer_cast<char>(in.data.raw_owner),
                                                                      const_cast<char*>(in.data.raw.data())))
                                  : copy_of(s, in.data.raw);
            continue;
        }
        argument a{s};
        if (in.data.fill) in.data.fill(a);
        params[in.name] = std::move(a);
    }
    return params;
}

infer_response run(const loaded_model& m, const infer_request& r) {
    auto& stats = *m.stats;
    const auto start = clock_type::now();
    stats.pending++;
    struct pending_guard {
        model_stats& s;
        ~pending_guard() { s.pending--; }
    } guard{stats};
    try {
        auto params = make_params(m, r);
        stats.compute_input_ns += ns_since(start);
        std::vector<argument> results;
        try {
            if (m.batch_queue) {
                results = m.batch_queue->submit(std::move(params));  // counts queue, compute, executions
            } else {
                const auto queued = clock_type::now();
                auto slot = m.instances->acquire();
                stats.queue_ns += ns_since(queued);
                const auto computing = clock_type::now();
                results = m.prog->eval(params);
                stats.compute_infer_ns += ns_since(computing);
                stats.exec_count++;
            }
        } catch (const kiln::error& e) {
            rethrow_eval_error(m.name, e);
        }
        const auto outputting = clock_type::now();
        infer_response resp{m.name, m.version, r.id, {}};
        for (std::size_t i = 0; i < m.outputs.size(); ++i) {
            const auto& spec = m.outputs[i];
            bool wanted = r.outputs.empty(), binary = r.binary_outputs;
            for (auto& o : r.outputs)
                if (o.name == spec.name) wanted = true, binary = o.binary || r.binary_outputs;
            if (!wanted) continue;
            auto a = results.at(i).contiguous();
            auto datatype = datatype_of(a.get_shape().get_type());
            if (datatype.empty())
                fail(error_kind::internal, "output '" + spec.name + "' has a type the protocol cannot carry (" +
                                               std::string(type_name(a.get_shape().get_type())) + ")");
            std::vector<std::int64_t> dims(a.get_shape().lens().begin(), a.get_shape().lens().end());
            resp.outputs.push_back({spec.name, datatype, std::move(dims), std::move(a), binary});
        }
        stats.compute_output_ns += ns_since(outputting);
        std::size_t batch = 1;
        if (m.config.max_batch_size && !r.inputs.empty() && !r.inputs[0].shape.empty())
            batch = static_cast<std::size_t>(r.inputs[0].shape[0]);
        stats.inference_count += batch;
        stats.success++;
        const auto took = ns_since(start);
        stats.success_ns += took;
        stats.record_latency(took);
        stats.last_inference_ms = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
        return resp;
    } catch (...) {
        stats.failure++;
        stats.failure_ns += ns_since(start);
        throw;
    }
}

infer_response infer(const model_repository& repo, const infer_request& r) {
    auto m = repo.find(r.model, r.version);  // held until the response is built: a swap waits for it
    return run(*m, r);
}

}  // namespace kiln::serve
