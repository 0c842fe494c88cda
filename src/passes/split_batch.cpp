#include "passes/split_batch.hpp"

#include "passes/dead_code_elimination.hpp"
#include "passes/rewrite_utils.hpp"

#include "ops/nn_conv.hpp"
#include "ops/tensor_slice.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln {

namespace {

bool static_tensor(const shape& s) { return s.is_tensor() && !s.dynamic(); }

// The instructions (and parameters) whose value carries the batch as dimension 0.
using batched_set = std::unordered_set<const instruction*>;

// A constant operand of a pointwise op must not vary along the batch (it is shared by the
// copies as it is): fewer dimensions than the result, or a batch dimension of 1.
bool shared_constant(const shape& c, std::size_t out_rank) {
    return static_tensor(c) && (c.ndim() < out_rank || c.lens()[0] == 1);
}

// Whether `ins` computes image b of its result from image b of its inputs only, reading
// no non-constant value without the batch: batch-separable ops (traits) with constant
// weights, pointwise ops, concatenations off the batch axis.
bool separable(const instruction& ins, std::size_t batch, std::size_t min_pixels, const batched_set& batched) {
    if (!ins.module_inputs().empty() || !static_tensor(ins.get_shape())) return false;
    const auto& out = ins.get_shape().lens();
    if (out.size() < 3 || out[0] != batch) return false;
    const auto traits = ins.get_operator().traits();
    const bool pointwise = traits.pointwise && !traits.nondeterministic && !traits.side_effects;
    // Image b of input 0 makes image b of the result; inputs 1... are weights.
    const bool per_image = traits.batch_separable && !pointwise;
    if (rewrite::is<op::convolution>(ins)) {
        std::size_t pixels = 1;
        for (std::size_t d = 2; d < out.size(); ++d) pixels *= out[d];
        if (pixels < min_pixels) return false;
    } else if (auto* concat = ins.get_operator().any_cast<op::concat>()) {
        auto axis = concat->axis;
        if (axis < 0) axis += static_cast<std::int64_t>(out.size());
        if (axis <= 0) return false;
    } else if (!per_image && !pointwise) {
        return false;
    }
    for (std::size_t i = 0; i < ins.inputs().size(); ++i) {
        const auto& in = *ins.inputs()[i];
        if (in.is_literal()) {
            // Weights (a convolution's, shared by the copies); a pointwise op's broadcast constants.
            if (per_image ? i == 0 : !(pointwise && shared_constant(in.get_shape(), out.size()))) return false;
            continue;
        }
        // Weights must be constants (shared by the copies).
        if (per_image && i > 0) return false;
        if (!batched.count(&in) || in.get_shape().ndim() != out.size()) return false;
    }
    return true;
}

}  // namespace

void split_batch::apply(module& m) const {
    // The prefix: separable instructions up to the first that is not (parameters and
    // literals anywhere before it are not part of it).
    std::size_t batch = 0;
    batched_set batched;
    std::vector<instruction_ref> prefix;
    bool has_conv = false;
    std::size_t largest = 0;
    for (auto it = m.begin(); it != m.end(); ++it) {
        if (it->is_literal()) continue;
        if (it->is_param()) {
            const auto& s = it->get_shape();
            if (!static_tensor(s) || s.ndim() < 3) continue;
            if (batch == 0) batch = s.lens()[0];
            if (s.lens()[0] == batch) batched.insert(&*it);
            continue;
        }
        if (batch < 2 || !separable(*it, batch, min_pixels, batched)) break;
        batched.insert(&*it);
        prefix.push_back(it);
        has_conv = has_conv || rewrite::is<op::convolution>(it);
        largest = std::max(largest, it->get_shape().bytes());
    }
    if (!has_conv || largest < min_bytes) return;

    // Where to cut: after prefix[0, len), the values of the prefix read after it (or
    // returned) are its results, one concatenation each. The fewest results, latest cut.
    std::unordered_map<const instruction*, std::size_t> position;
    for (std::size_t i = 0; i < prefix.size(); ++i) position[&*prefix[i]] = i;
    const bool no_return = m.get_return() == m.end();  // the last value is then the result
    auto results_of = [&](std::size_t len) {
        std::vector<instruction_ref> results;
        for (std::size_t i = 0; i < len; ++i) {
            const bool read_later = std::any_of(prefix[i]->outputs().begin(), prefix[i]->outputs().end(), [&](auto u) {
                auto p = position.find(&*u);
                return p == position.end() || p->second >= len;
            });
            const bool last_value = no_return && std::next(prefix[i]) == m.end();
            if (read_later || last_value) results.push_back(prefix[i]);
        }
        return results;
    };
    std::size_t len = 0, fewest = std::numeric_limits<std::size_t>::max();
    for (std::size_t l = 1; l <= prefix.size(); ++l) {
        const auto n = results_of(l).size();
        if (n <= fewest && n > 0) {
            fewest = n;
            len = l;
        }
    }
    // Only worth it where a convolution is inside the cut.
    if (len == 0 || std::none_of(prefix.begin(), prefix.begin() + static_cast<std::ptrdiff_t>(len),
                                 [](auto ins) { return rewrite::is<op::convolution>(ins); }))
        return;
    const auto results = results_of(len);

    // The copies, image by image, then the concatenations, all where the cut is.
    const auto pos = std::next(prefix[len - 1]);
    std::unordered_map<const instruction*, std::vector<instruction_ref>> per_image;
    for (std::size_t b = 0; b < batch; ++b) {
        std::unordered_map<const instruction*, instruction_ref> copy;
        for (std::size_t i = 0; i < len; ++i) {
            std::vector<instruction_ref> args;
            for (auto in : prefix[i]->inputs()) {
                if (in->is_literal()) {
                    args.push_back(in);
                } else if (auto c = copy.find(&*in); c != copy.end()) {
                    args.push_back(c->second);
                } else {  // a parameter: its image b, a view
                    const auto b64 = static_cast<std::int64_t>(b);
                    auto view = m.insert_instruction(pos, op::slice{{0}, {b64}, {b64 + 1}, {}}, {in});
                    copy.emplace(&*in, view);
                    args.push_back(view);
                }
            }
            copy[&*prefix[i]] = m.insert_instruction(pos, prefix[i]->get_operator(), args);
        }
        for (auto r : results) per_image[&*r].push_back(copy.at(&*r));
    }
    for (auto r : results) {
        auto joined = m.insert_instruction(pos, op::concat{0}, per_image.at(&*r));
        m.replace_instruction(r, joined);
    }
    dead_code_elimination{}.apply(m);
}

}  // namespace kiln
