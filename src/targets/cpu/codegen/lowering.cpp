#include "targets/cpu/codegen/lowering.hpp"

#include "ops/fused.hpp"
#include "ops/pointwise_binary.hpp"
#include "passes/fuse_pointwise.hpp"
#include "targets/cpu/codegen/compiler.hpp"
#include "targets/cpu/codegen/emit.hpp"
#include "targets/cpu/codegen/generic_layout.hpp"
#include "targets/cpu/codegen/shared.hpp"
#include "targets/cpu/codegen/isa.hpp"
#include "targets/cpu/codegen/kernel_op.hpp"
#include "targets/cpu/kernels/dynamic/dyn_concat.hpp"
#include "targets/cpu/kernels/dynamic/dyn_pad.hpp"
#include "targets/cpu/kernels/dynamic/dyn_primitive.hpp"
#include "targets/cpu/kernels/dynamic/dyn_resize.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <unordered_set>

namespace kiln::cpu::codegen {

namespace {

struct planned {
    instruction_ref ins;
    op::fused body;
    std::vector<instruction_ref> inputs;
    std::string symbol;
    generic_layout layout;  // a generic program's kernel (empty: static)
    plan nodes;             // the plan the kernel is generated from
};

// How many trailing dims a group's reductions reduce (0: none); fusion gives a dynamic
// group only reductions over its last axes, all over the same ones.
std::size_t reduced_dims(const op::fused& body, std::size_t rank) {
    for (const auto& n : body.nodes)
        if (n.op.traits().reduction) return reduction_axes(n.op, rank).size();
    return 0;
}

// Whether a generic program's value is laid out channels-last: a result of
// cpu::dyn_primitive (oneDNN's fast layout at every size: 1-D convolutions' [N, C, W] too),
// of a group walked so, or of a cpu::dyn_concat, cpu::dyn_resize or cpu::dyn_pad of such
// values (they keep their order); of this rank.
bool channels_last(instruction_ref x, const std::unordered_set<const instruction*>& walked_channels_last,
                   std::size_t rank) {
    if (!x->get_shape().is_tensor() || x->get_shape().ndim() != rank || rank < 3) return false;
    if (x->get_operator().any_cast<dyn_concat>())
        return std::all_of(x->inputs().begin(), x->inputs().end(), [&](instruction_ref i) {
            return channels_last(i, walked_channels_last, rank);
        });
    if (x->get_operator().any_cast<dyn_resize>()) return rank == 4 && channels_last(x->inputs().front(), walked_channels_last, rank);
    if (x->get_operator().any_cast<dyn_pad>()) return channels_last(x->inputs().front(), walked_channels_last, rank);
    return x->get_operator().any_cast<dyn_primitive>() != nullptr || walked_channels_last.count(&*x) > 0;
}

}  // namespace

pass make_fusion_pass(const cpu_options& opts) {
    fuse_pointwise f;
    f.supported = [](instruction_ref ins) { return kernel_can_run(ins) || generic_kernel_can_run(ins); };
    f.dynamic = true;
    f.reserved = [o = &opts](module& m) { return post_op_chains(m, o); };
    if (!opts.fusion) f.min_size = static_cast<std::size_t>(-1);
    return f;
}

// Kernels lowered in sub-modules, waiting for the main module's compiler run.
struct lowering::batch {
    struct entry {
        module* m;
        instruction_ref ins;
    };
    std::vector<entry> kernels;                // replaced instructions, carriers first per module
    std::map<std::string, std::string> texts;  // symbol -> kernel source, all modules
};

std::shared_ptr<lowering::batch> lowering::make_batch() { return std::make_shared<batch>(); }

void lowering::apply(module& m) const {
    if (!options) throw_error(error_code::runtime, name() + ": made without the cpu context's options");
    const cpu_options& o = *options;
    const bool fast_math = o.fast_math;
    const auto start = std::chrono::steady_clock::now();
    std::vector<planned> work;
    std::unordered_set<const instruction*> walked_channels_last;  // generic groups walked (0, 2, ..., 1)
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        planned p{ins, {}, {}, {}, {}, {}};
        const bool dynamic = ins->get_shape().is_tensor() && ins->get_shape().dynamic();
        if (ins->get_operator().any_cast<op::fused>()) {
            p.body = ins->get_operator().get<op::fused>();
            p.inputs = ins->inputs();
        } else if ((ins->get_operator().traits().pointwise || ins->get_operator().traits().reduction) &&
                   ins->module_inputs().empty() && (kernel_can_run(ins) || generic_kernel_can_run(ins))) {
            p.body = single_group(ins, p.inputs);
        } else {
            continue;
        }
        try {
            if (dynamic) {
                // One kernel for every size the generic program meets (generic_layout.hpp);
                // a group it cannot describe stays for the reference kernels.
                const auto in = to_shapes(p.inputs);
                const auto reduced = reduced_dims(p.body, ins->get_shape().ndim());
                // An elementwise group reading a channels-last value of its rank walks
                // channels-last: (0, 2, 3, 1), or (0, 2, 1) after a 1-D convolution (wav2vec2's
                // GELUs were left to the interpreter there, their inputs misfits).
                std::vector<std::int64_t> order;
                const auto rank = ins->get_shape().ndim();
                if (reduced == 0 && std::any_of(p.inputs.begin(), p.inputs.end(), [&](instruction_ref x) {
                        return channels_last(x, walked_channels_last, rank);
                    })) {
                    order = {0};
                    for (std::size_t d = 2; d < rank; ++d) order.push_back(static_cast<std::int64_t>(d));
                    order.push_back(1);
                }
                try {
                    p.nodes = sample_plan(p.body, in, ins->get_shape(), fast_math);
                    p.layout = make_generic_layout(in, ins->get_shape(), reduced, order);
                } catch (const error&) {
                    continue;
                }
                if (!order.empty()) walked_channels_last.insert(&*ins);
                if (p.nodes.reduction && p.nodes.row_output() != !p.layout.reads_along(p.layout.inputs(), p.layout.groups - 1))
                    continue;
                p.symbol = generic_kernel_symbol(p.nodes, p.layout);
            } else {
                p.nodes = make_plan(p.body, to_shapes(p.inputs), ins->get_shape().as_standard(), fast_math);
                p.symbol = kernel_symbol(p.nodes);
            }
            work.push_back(std::move(p));
        } catch (const error& e) {
            if (e.code() != error_code::unsupported) throw;
            // Stays as it is: the reference kernel runs it.
        }
    }
    auto& batch = *pending;
    const bool last = m.name() == "main";
    if (work.empty() && (!last || batch.kernels.empty())) return;
    // This module's distinct kernels, each once, in a stable order.
    std::map<std::string, std::string> kernels;
    for (auto& p : work)
        if (!kernels.count(p.symbol))
            kernels[p.symbol] = p.layout.empty() ? emit_kernel(p.nodes, p.symbol)
                                                 : emit_generic_kernel(p.nodes, p.layout, p.symbol);
    auto source_of = [](const std::map<std::string, std::string>& ks) {
        std::vector<std::string> texts;
        for (auto& [sym, text] : ks) texts.push_back(text);
        return library_source(texts);
    };
    const std::string isa = target_isa(o);
    // A sub-module: its kernels carry their own source (for finalize, should no main
    // module follow) and wait for the main module's library.
    codegen::build_result built;
    std::string source;
    if (last) {
        for (auto& [sym, text] : kernels) batch.texts.emplace(sym, text);
        source = source_of(batch.texts);
        built = build_library(source, isa, fast_math, o);
    } else {
        source = source_of(kernels);
        for (auto& [sym, text] : kernels) batch.texts.emplace(sym, text);
    }
    const std::string key = built.key.empty() ? content_hash(source + isa) : built.key;
    bool first = true;
    for (auto& p : work) {
        auto args = p.inputs;
        if (p.layout.empty()) {
            const auto out = p.ins->get_shape().as_standard();
            args.push_back(m.insert_instruction(p.ins, builtin::allocate{out}, {}));
        }
        fused_kernel k;
        k.body = p.body;
        k.generic = p.layout;
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
        if (!last) batch.kernels.push_back({&m, p.ins});
    }
    if (last) {
        // The sub-modules' kernels use the program's library; each module's first kernel
        // carries it (loading dedups by key), so every module loads on its own.
        for (auto& e : batch.kernels) {
            auto k = e.ins->get_operator().get<fused_kernel>();
            k.library = key;
            k.lib = built.lib;
            if (k.source.is_binary()) {
                k.source = value::binary{source};
                k.object = built.object.empty() ? value{} : value{value::binary{built.object}};
                k.object_isa = built.object.empty() ? std::string{} : isa;
            }
            e.m->replace_instruction(e.ins, k, e.ins->inputs());
        }
        batch.kernels.clear();
        batch.texts.clear();
    }
    if (o.codegen_verbose)
        std::cerr << "[kiln] codegen: module " << m.name() << ": " << work.size() << " fused kernels, "
                  << kernels.size() << " distinct, "
                  << (!last ? "deferred to the main module" : built.lib ? "compiled" : "interpreted") << " for " << isa
                  << " in "
                  << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
                  << " ms\n";
}

}  // namespace kiln::cpu::codegen
