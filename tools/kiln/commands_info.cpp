// Commands that describe: read, params, onnx-ops, ops, targets, version.
#include "commands.hpp"
#include "model_io.hpp"
#include "progress.hpp"

#include <kiln/onnx.hpp>
#include <kiln/pipeline.hpp>
#include <kiln/register_op.hpp>

#include <nlohmann/json.hpp>

#include <iostream>
#include <sstream>
#include <sys/resource.h>

namespace kiln::cli {

using json = nlohmann::ordered_json;

double peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;
}

namespace {
json shape_json(const shape& s) {
    json j;
    j["text"] = s.to_string();
    if (!s.is_tensor()) return j;
    j["type"] = std::string(type_name(s.get_type()));
    json dims = json::array();
    for (auto& d : s.to_dynamic_dims()) {
        if (d.is_fixed()) dims.push_back(d.min);
        else {
            json dd = {{"min", d.min}};
            if (d.max == dynamic_dimension::unbounded) dd["max"] = nullptr;
            else dd["max"] = d.max;
            if (!d.optimals.empty()) dd["optimals"] = std::vector<std::size_t>(d.optimals.begin(), d.optimals.end());
            if (!d.symbol.empty()) dd["symbol"] = d.symbol;  // "batch", "past + sequence"
            dims.push_back(dd);
        }
    }
    j["dims"] = dims;
    return j;
}

void print_list(const std::vector<std::string>& items, const options& o, const char* key) {
    if (o.json) {
        std::cout << json{{key, items}}.dump() << "\n";
        return;
    }
    for (auto& i : items) std::cout << i << "\n";
}
}  // namespace

int cmd_read(const options& o) {
    auto p = load_model(o);
    if (!o.passes.empty()) {
        std::vector<pass> passes;
        std::stringstream ss(o.passes);
        std::string name;
        while (std::getline(ss, name, ','))
            if (!name.empty()) passes.push_back(make_pass(name));
        run_passes(p, passes);
    }
    if (o.optimize) run_passes(p, target_independent_passes(make_compile_options(o)));
    // The parsed program, unless a target is asked for explicitly.
    if (o.target_given) {
        spinner s("compiling for " + o.target, o.quiet);
        compile_model(p, o, true);
    }
    if (o.json) {
        json j;
        j["model"] = o.model;
        j["compiled"] = p.is_compiled();
        j["target"] = p.target_name();
        j["ir"] = p.to_string();
        std::cout << j.dump() << "\n";
    } else {
        std::cout << p;
    }
    return exit_ok;
}

int cmd_params(const options& o) {
    auto p = load_model(o);
    auto shapes = p.get_parameter_shapes();
    auto outs = p.get_output_shapes();
    auto out_names = p.get_output_names();
    if (o.json) {
        json j;
        j["inputs"] = json::array();
        for (auto& n : p.get_parameter_names()) {
            json e = {{"name", n}};
            e["shape"] = shape_json(shapes.at(n));
            e["has_default"] = p.get_parameter_default(n) != nullptr;
            j["inputs"].push_back(e);
        }
        j["outputs"] = json::array();
        for (std::size_t i = 0; i < outs.size(); ++i) j["outputs"].push_back({{"name", out_names[i]}, {"shape", shape_json(outs[i])}});
        std::cout << j.dump() << "\n";
        return exit_ok;
    }
    std::cout << "inputs:\n";
    for (auto& n : p.get_parameter_names())
        std::cout << "  " << n << ": " << shapes.at(n) << (p.get_parameter_default(n) ? " (has a default)" : "") << "\n";
    std::cout << "outputs:\n";
    for (std::size_t i = 0; i < outs.size(); ++i) std::cout << "  " << out_names[i] << ": " << outs[i] << "\n";
    return exit_ok;
}

int cmd_onnx_ops(const options& o) {
    print_list(get_onnx_operators(), o, "onnx_operators");
    return exit_ok;
}

int cmd_ops(const options& o) {
    // Every target's own operations too: a target built as a module (gpu) registers them
    // when it is loaded, which listing it does.
    for (const auto& name : get_target_names()) (void)get_target(name);
    print_list(get_operator_names(), o, "operations");
    return exit_ok;
}

int cmd_targets(const options& o) {
    json list = json::array();
    for (const char* name : {"ref", "cpu", "gpu"}) {
        std::string why;
        try {
            why = get_target(name)->unavailable_reason();
        } catch (const error&) {
            why = std::string(name) == "gpu" ? "not built (no CUDA support in this build)" : "not built";
        }
        list.push_back({{"name", name}, {"available", why.empty()}, {"reason", why}});
    }
    if (o.json) {
        std::cout << json{{"targets", list}}.dump() << "\n";
        return exit_ok;
    }
    for (auto& t : list)
        std::cout << t["name"].get<std::string>() << ": "
                  << (t["available"].get<bool>() ? "available" : "unavailable: " + t["reason"].get<std::string>()) << "\n";
    return exit_ok;
}

int cmd_version(const options& o) {
    if (o.json) std::cout << json{{"version", KILN_VERSION}, {"max_onnx_opset", max_supported_opset()}}.dump() << "\n";
    else std::cout << "kiln " << KILN_VERSION << " (ONNX opsets 1-" << max_supported_opset() << ")\n";
    return exit_ok;
}

}  // namespace kiln::cli
