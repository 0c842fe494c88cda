#include "targets/cpu/team_rule.hpp"

#include "targets/cpu/kernels/attention/attention.hpp"
#include "targets/cpu/kernels/conv_gemm/conv_gemm.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm.hpp"
#include "targets/cpu/kernels/winograd/winograd.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/instruction.hpp>

namespace kiln::cpu {

namespace {

bool no_work(const operation& op) {
    return op.any_cast<builtin::param>() || op.any_cast<builtin::literal_op>() || op.any_cast<builtin::return_op>() ||
           op.any_cast<builtin::get_tuple_elem>() || op.any_cast<builtin::allocate>() || op.any_cast<builtin::load>();
}

bool uses_the_team(const operation& op) {
    return op.any_cast<winograd_conv>() || op.any_cast<conv_gemm>() || op.any_cast<packed_gemm>() ||
           op.any_cast<attention>();
}

// Multiply-adds, roughly: each result value times the constant inputs' values per output
// channel (a convolution's or a product's weights); the result's size where none.
std::size_t work_of(const instruction& ins) {
    const shape& out = ins.get_shape();
    const std::size_t values = out.elements();
    const auto& lens = out.lens();
    const std::size_t channels = lens.size() >= 3 ? lens[1] : !lens.empty() ? lens.back() : 1;
    std::size_t constant = 0;
    for (const auto& in : ins.inputs())
        if (in->is_literal()) constant += in->get_shape().elements();
    return constant == 0 || channels == 0 ? values : values * (constant / channels + 1);
}

}  // namespace

team_census census_of(const module& main) {
    team_census c;
    for (const auto& ins : main) {
        const operation& op = ins.get_operator();
        if (no_work(op)) continue;
        const shape& out = ins.get_shape();
        // Loops and branches are not measured; dynamic shapes are not known here.
        if (!ins.module_inputs().empty() || !out.is_tensor() || out.dynamic()) {
            c.small = false;
            return c;
        }
        if (uses_the_team(op)) {
            ++c.team_kernels;
            continue;
        }
        ++c.others;
        const std::size_t work = work_of(ins);
        if (out.elements() >= max_alone_values || work >= max_alone_macs) c.small = false;
        // Work that would have had both threads outside the team (dnnl_util.hpp's rule).
        if (work >= single_thread_macs || (work == out.elements() && work >= single_thread_elements))
            ++c.parallel_others;
    }
    return c;
}

bool runs_on_a_team(const module& main, std::size_t threads) {
    if (threads <= 1) return false;
    const team_census c = census_of(main);
    return c.small && c.team_kernels >= min_team_kernels && c.team_kernels >= c.others &&
           c.parallel_others * others_per_team_kernel <= c.team_kernels;
}

}  // namespace kiln::cpu
