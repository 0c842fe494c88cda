#include "passes/attention_match.hpp"

#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/softmax.hpp"
#include "passes/rewrite_utils.hpp"

#include <cstdint>

namespace kiln::attention_match {

namespace {

using rewrite::is;
using rewrite::is_any;

bool is_scalar_literal(instruction_ref x) { return x->is_literal() && x->get_shape().elements() == 1; }

float scalar_value(instruction_ref x) { return x->get_literal().to_vector<float>().at(0); }

// The one reader of x, when it has exactly one.
std::optional<instruction_ref> only_user(instruction_ref x) {
    if (x->outputs().size() != 1) return std::nullopt;
    return x->outputs().front();
}

// Equal dims, static or dynamic (the scores beside a mask that broadcasts to them).
bool same_dims(const shape& a, const shape& b) {
    if (!a.dynamic() && !b.dynamic()) return a.lens() == b.lens();
    return a.to_dynamic_dims() == b.to_dynamic_dims();
}

}  // namespace

std::optional<match> match_at(instruction_ref sm, bool dynamic) {
    if (!is<op::softmax>(sm)) return std::nullopt;
    const auto axis = sm->get_operator().to_value().at("axis").get_int64();
    if (!sm->get_shape().is_tensor() || (sm->get_shape().dynamic() && !dynamic)) return std::nullopt;
    const auto rank = static_cast<std::int64_t>(sm->get_shape().ndim());
    if (rank < 3 || (axis != -1 && axis != rank - 1)) return std::nullopt;
    match mt;
    auto pv = only_user(sm);
    if (!pv || !is<op::matmul>(*pv) || (*pv)->inputs().size() != 2 || (*pv)->inputs()[0] != sm) return std::nullopt;
    mt.pv = *pv;
    mt.between.push_back(sm);
    auto x = sm->inputs().at(0);
    if (is<op::where_op>(x) && x->outputs().size() == 1 && x->inputs().size() == 3) {
        const auto& in = x->inputs();
        const bool fill_second = is_scalar_literal(in[2]) && !is_scalar_literal(in[1]);
        if (!fill_second && !(is_scalar_literal(in[1]) && !is_scalar_literal(in[2]))) return std::nullopt;
        mt.mask = in[0];
        mt.select = x;
        mt.fill_first = !fill_second;
        mt.between.push_back(x);
        x = in[fill_second ? 1 : 2];
    } else if (is<op::add_op>(x) && x->outputs().size() == 1) {
        const auto& in = x->inputs();
        const bool scores_first =
            same_dims(in[0]->get_shape(), x->get_shape()) && is_any<op::mul_op, op::div_op, op::matmul>(in[0]);
        const std::size_t scores = scores_first ? 0 : 1;
        mt.mask = in[1 - scores];
        mt.between.push_back(x);
        x = in[scores];
    }
    if (is_any<op::mul_op, op::div_op>(x) && x->outputs().size() == 1) {
        const auto& in = x->inputs();
        const bool div = is<op::div_op>(x);
        std::optional<std::size_t> c;
        if (is_scalar_literal(in[1])) c = 1;
        else if (!div && is_scalar_literal(in[0])) c = 0;
        if (!c) return std::nullopt;
        const float value = scalar_value(in[*c]);
        mt.scale = div ? 1.0f / value : value;
        mt.scaling = x;
        mt.between.push_back(x);
        x = in[1 - *c];
    }
    if (!is<op::matmul>(x) || x->outputs().size() != 1 || x->inputs().size() != 2) return std::nullopt;
    mt.qk = x;
    return mt;
}

std::vector<match> find_all(module& m, bool dynamic) {
    std::vector<match> found;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (auto mt = match_at(ins, dynamic)) found.push_back(*mt);
    return found;
}

}  // namespace kiln::attention_match
