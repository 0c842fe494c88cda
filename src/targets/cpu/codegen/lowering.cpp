#include "targets/cpu/codegen/lowering.hpp"

#include "ops/fused.hpp"
#include "passes/fuse_pointwise.hpp"
#include "targets/cpu/codegen/compiler.hpp"
#include "targets/cpu/codegen/emit.hpp"
#include "targets/cpu/codegen/hash.hpp"
#include "targets/cpu/codegen/isa.hpp"
#include "targets/cpu/codegen/kernel_op.hpp"

#include <kiln/builtin_ops.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>

namespace kiln::cpu::codegen {

namespace {

bool env_off(const char* name) {
    const char* v = std::getenv(name);
    return v && std::string(v) == "0";
}

bool static_tensor(const shape& s) { return s.is_tensor() && !s.dynamic(); }

// A lone elementwise op becomes a one-node group (its scalar literal inputs inside).
op::fused single_group(instruction_ref ins, std::vector<instruction_ref>& inputs) {
    op::fused f;
    op::fused_node n{ins->get_operator(), {}};
    for (auto in : ins->inputs()) {
        if (in->is_literal() && in->get_shape().elements() == 1) {
            n.args.push_back(static_cast<std::int64_t>(f.nodes.size()));
            f.nodes.push_back({op::fused_literal{in->get_literal()}, {}});
        } else {
            n.args.push_back(op::fused_input_arg(inputs.size()));
            inputs.push_back(in);
        }
    }
    f.nodes.push_back(std::move(n));
    return f;
}

struct planned {
    instruction_ref ins;
    op::fused body;
    std::vector<instruction_ref> inputs;
    std::string symbol;
};

}  // namespace

bool kernel_can_run(instruction_ref ins) {
    if (!static_tensor(ins->get_shape()) || ins->get_shape().elements() == 0) return false;
    std::vector<type> in;
    for (std::size_t i = 0; i < ins->inputs().size(); ++i) {
        auto x = ins->inputs()[i];
        if (!static_tensor(x->get_shape())) return false;
        type t = x->get_shape().get_type();
        // pow's exponent may be a scalar constant of any numeric type (it becomes a body constant).
        if (ins->name() == "pow" && i == 1 && x->is_literal() && x->get_shape().elements() == 1 && t != type::string)
            t = type::float32;
        in.push_back(t);
    }
    return kernel_supports(ins->name(), ins->get_operator().to_value(), in, ins->get_shape().get_type());
}

pass make_fusion_pass(const compile_options&) {
    fuse_pointwise f;
    f.supported = [](instruction_ref ins) { return kernel_can_run(ins); };
    f.reserved = [](module& m) { return post_op_chains(m); };
    if (env_off("KILN_CPU_FUSION")) f.min_size = static_cast<std::size_t>(-1);
    return f;
}

void lowering::apply(module& m) const {
    const auto start = std::chrono::steady_clock::now();
    std::vector<planned> work;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        planned p{ins, {}, {}, {}};
        if (ins->name() == "fused") {
            p.body = ins->get_operator().get<op::fused>();
            p.inputs = ins->inputs();
        } else if (ins->get_operator().traits().pointwise && ins->module_inputs().empty() && kernel_can_run(ins)) {
            p.body = single_group(ins, p.inputs);
        } else {
            continue;
        }
        try {
            auto pl = make_plan(p.body, to_shapes(p.inputs), ins->get_shape().as_standard(), fast_math);
            p.symbol = kernel_symbol(pl);
            work.push_back(std::move(p));
        } catch (const error& e) {
            if (e.code() != error_code::unsupported) throw;
            // Stays as it is: the reference kernel runs it.
        }
    }
    if (work.empty()) return;
    // One library for the module: each distinct kernel once, in a stable order.
    std::map<std::string, std::string> kernels;
    for (auto& p : work)
        if (!kernels.count(p.symbol))
            kernels[p.symbol] =
                emit_kernel(make_plan(p.body, to_shapes(p.inputs), p.ins->get_shape().as_standard(), fast_math), p.symbol);
    std::vector<std::string> texts;
    for (auto& [sym, text] : kernels) texts.push_back(text);
    const std::string source = library_source(texts);
    const std::string isa = target_isa();
    auto built = build_library(source, isa, fast_math);
    const std::string key = built.key.empty() ? content_hash(source + isa) : built.key;
    bool first = true;
    for (auto& p : work) {
        const auto out = p.ins->get_shape().as_standard();
        auto buffer = m.insert_instruction(p.ins, builtin::allocate{out}, {});
        auto args = p.inputs;
        args.push_back(buffer);
        fused_kernel k;
        k.body = p.body;
        k.fast_math = fast_math;
        k.symbol = p.symbol;
        k.library = key;
        k.lib = built.lib;
        if (first) {
            k.source = value::binary{source};
            if (!built.object.empty()) {
                k.object = value::binary{built.object};
                k.object_isa = isa;
            }
            first = false;
        }
        m.replace_instruction(p.ins, k, args);
    }
    if (const char* v = std::getenv("KILN_CODEGEN_VERBOSE"); v && std::string(v) != "0")
        std::cerr << "[kiln] codegen: module " << m.name() << ": " << work.size() << " fused kernels, "
                  << kernels.size() << " distinct, " << (built.lib ? "compiled" : "interpreted") << " for " << isa
                  << " in "
                  << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
                  << " ms\n";
}

}  // namespace kiln::cpu::codegen
