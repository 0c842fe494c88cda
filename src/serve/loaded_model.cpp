#include "serve/loaded_model.hpp"

#include "serve/batcher.hpp"
#include "serve/errors.hpp"

namespace kiln::serve {

std::vector<std::int64_t> tensor_spec::protocol_shape() const {
    std::vector<std::int64_t> out;
    for (auto& d : dims) out.push_back(d.is_fixed() ? static_cast<std::int64_t>(d.min) : -1);
    return out;
}

void model_stats::record_latency(std::uint64_t ns) {
    std::size_t i = 0;
    while (i < latency_bounds_us.size() && ns > latency_bounds_us[i] * 1000) ++i;
    latency_buckets[i]++;
}

instance_pool::slot instance_pool::acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
    return slot(*this);
}

void instance_pool::release() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++free_;
    }
    cv_.notify_one();
}

namespace {
tensor_spec spec_of(const std::string& name, const shape& s) {
    tensor_spec t;
    t.name = name;
    t.element_type = s.get_type();
    t.dims = s.to_dynamic_dims();
    return t;
}
}  // namespace

loaded_model::loaded_model(std::string n, std::int64_t v, std::shared_ptr<const program> p, model_config c,
                           std::shared_ptr<model_stats> s)
    : name(std::move(n)), version(v), prog(std::move(p)), config(std::move(c)), stats(std::move(s)),
      instances(std::make_unique<instance_pool>(config.instance_count)) {
    auto shapes = prog->get_parameter_shapes();
    for (auto& pname : prog->get_parameter_names()) {
        auto t = spec_of(pname, shapes.at(pname));
        t.optional = prog->get_parameter_default(pname) != nullptr;
        inputs.push_back(std::move(t));
    }
    auto out_shapes = prog->get_output_shapes();
    auto out_names = prog->get_output_names();
    for (std::size_t i = 0; i < out_shapes.size(); ++i) outputs.push_back(spec_of(out_names.at(i), out_shapes[i]));
    if (config.dynamic_batching) {
        for (auto& t : inputs)
            if (t.dims.empty() || t.optional)
                fail(error_kind::bad_request, "model '" + name + "': dynamic_batching needs every input batched along dim 0 "
                                              "(input '" + t.name + "' has no dims or a default value)");
        batch_queue = std::make_unique<batcher>(*this);
    }
}

loaded_model::~loaded_model() = default;

const tensor_spec* loaded_model::find_input(const std::string& n) const {
    for (auto& t : inputs)
        if (t.name == n) return &t;
    return nullptr;
}

const tensor_spec* loaded_model::find_output(const std::string& n) const {
    for (auto& t : outputs)
        if (t.name == n) return &t;
    return nullptr;
}

}  // namespace kiln::serve
