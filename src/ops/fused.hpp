// fused{nodes}: a group of elementwise ops and reductions that the fusion pass
// (src/passes/fuse_pointwise.cpp) put together so that a target can run them as one
// kernel (the cpu target generates one; see src/targets/cpu/codegen/).
//
// The body is an attribute, not a sub-module: a list of nodes, each an ordinary IR op
// (add, exp, reduce_mean, convert, ...) with the positions of its arguments. It is saved,
// printed, compared and hashed like any attribute (reflect), passes never see it, and a
// pass can build one without access to the program (sub-modules belong to the program).
// Scalar constants the group used live in the body as `fused_literal` nodes, so a code
// generator sees their values whenever it runs (also when a saved program is loaded).
//
// The reference compute runs the nodes one after the other with their own reference
// computes: a fused instruction computes exactly what its ops computed before fusion.
#pragma once
#include <kiln/literal.hpp>
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

struct fused_node {
    operation op;
    // i >= 0: the result of body node i (an earlier one); i < 0: input -i - 1 of the fused op.
    std::vector<std::int64_t> args;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.args, "args");
    }
    friend bool operator==(const fused_node& a, const fused_node& b) { return a.op == b.op && a.args == b.args; }
};

struct fused {
    std::vector<fused_node> nodes;  // in evaluation order; the last one is the result
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.nodes, "nodes");
    }
    std::string name() const { return "fused"; }
    // The result shape of the last node (row-major). Inputs may have any strides.
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;

    // The shape of every node for these input shapes; throws a shape error naming the
    // node when the body is malformed (bad argument positions, a node that rejects its inputs).
    std::vector<shape> node_shapes(const std::vector<shape>& inputs) const;
};

// A constant inside a fused body (the fusion pass moves scalar literals into the body).
struct fused_literal {
    literal value;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.value, "value");
    }
    std::string name() const { return "fused_literal"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape&, const std::vector<argument>&) const { return value.get_argument(); }
};

// Encodes input position i as a fused_node argument, and back.
constexpr std::int64_t fused_input_arg(std::size_t i) { return -static_cast<std::int64_t>(i) - 1; }
constexpr std::size_t fused_arg_input(std::int64_t a) { return static_cast<std::size_t>(-(a + 1)); }

}  // namespace kiln::op
