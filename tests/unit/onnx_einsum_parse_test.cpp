// Einsum equations that are batched matrix products parse into transpose + matmul
// (onnx/einsum_product.hpp), everything else into op::einsum. The analysis is checked on
// its own, then whole models: the parsed program on ref and cpu against op::einsum's
// reference kernel on random non-zero data.
#include "onnx/einsum_product.hpp"
#include "ops/nn_einsum.hpp"
#include "tensor_test_util.hpp"

#include <algorithm>
#include <cmath>

using namespace kiln;
using namespace kiln::test;
using kiln::onnx_frontend::einsum_as_product;

namespace {

using perm = std::vector<std::int64_t>;

bool has_op(const program& p, const std::string& name) {
    auto n = op_names(*p.get_main_module());
    return std::find(n.begin(), n.end(), name) != n.end();
}

onnx_model einsum_model(const std::string& equation, const std::vector<std::int64_t>& a,
                        const std::vector<std::int64_t>& b) {
    onnx_model m;
    m.opset = 12;
    m.input("a", onnx_float, a);
    m.input("b", onnx_float, b);
    m.node("Einsum", {"a", "b"}, {"y"}, {onnx_attr::s("equation", equation)});
    m.output("y", onnx_float);
    return m;
}

void expect_near_all(const argument& actual, const argument& expected, const std::string& what) {
    ASSERT_EQ(actual.get_shape().lens(), expected.get_shape().lens()) << what;
    auto x = values(actual), e = values(expected);
    for (std::size_t i = 0; i < e.size(); ++i)
        ASSERT_NEAR(x[i], e[i], 1e-4 * (1 + std::fabs(e[i]))) << what << " element " << i;
}

// Parses `equation` for inputs of lens a and b (a dim < 0 is dynamic: the same named
// size in both), checks whether it became a matmul, and compares the program compiled
// for ref and for cpu with op::einsum on ref, at the sizes `runs` gives the dynamic dims.
void check(const std::string& equation, const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b,
           bool matmul, const std::vector<std::size_t>& runs = {1}) {
    SCOPED_TRACE(equation);
    onnx_options o;
    o.default_dyn_dim_value = {1, 8, {}};
    auto parsed = einsum_model(equation, a, b).parse(o);
    EXPECT_EQ(has_op(parsed, "matmul"), matmul);
    EXPECT_EQ(has_op(parsed, "einsum"), !matmul);
    auto lens = [](const std::vector<std::int64_t>& d, std::size_t dyn) {
        std::vector<std::size_t> l;
        for (auto x : d) l.push_back(x < 0 ? dyn : static_cast<std::size_t>(x));
        return l;
    };
    for (const char* target : {"ref", "cpu"}) {
        auto p = parsed;
        p.compile(*get_target(target));
        unsigned seed = 11;
        for (auto dyn : runs) {
            auto xa = random_arg(type::float32, lens(a, dyn), seed++);
            auto xb = random_arg(type::float32, lens(b, dyn), seed++);
            auto expected = run_op(op::einsum{equation}, {xa, xb}).outputs[0];
            expect_near_all(p.eval({{"a", xa}, {"b", xb}})[0], expected,
                            std::string(target) + " at " + std::to_string(dyn));
        }
    }
}

}  // namespace

TEST(einsum_as_product, maxvit_attention_needs_one_transpose) {
    // Scores: K (D) is last of both, so B is transposed; the product is in the output's order.
    auto s = einsum_as_product("B G H I D, B G H J D -> B G H I J");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->perm_a, (perm{0, 1, 2, 3, 4}));
    EXPECT_EQ(s->perm_b, (perm{0, 1, 2, 4, 3}));
    EXPECT_EQ(s->perm_out, (perm{0, 1, 2, 3, 4}));
    EXPECT_EQ(s->batch, 3u);
    EXPECT_FALSE(s->needs_grouping());
    // Context: already [batch, M, K] x [batch, K, N].
    auto c = einsum_as_product("BGHIJ,BGHJD->BGHID");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->perm_a, (perm{0, 1, 2, 3, 4}));
    EXPECT_EQ(c->perm_b, (perm{0, 1, 2, 3, 4}));
    EXPECT_EQ(c->perm_out, (perm{0, 1, 2, 3, 4}));
}

TEST(einsum_as_product, labels_sort_into_batch_m_k_n) {
    auto p = einsum_as_product("ibj,bjk->bik");  // A's batch label is not first
    ASSERT_TRUE(p);
    EXPECT_EQ(p->perm_a, (perm{1, 0, 2}));
    EXPECT_EQ(p->perm_b, (perm{0, 1, 2}));
    EXPECT_EQ(p->perm_out, (perm{0, 1, 2}));
    auto q = einsum_as_product("bhqd,bhkd->qbkh");  // batch labels in the output's order
    ASSERT_TRUE(q);
    EXPECT_EQ(q->perm_a, (perm{0, 1, 2, 3}));
    EXPECT_EQ(q->perm_b, (perm{0, 1, 3, 2}));
    EXPECT_EQ(q->perm_out, (perm{2, 0, 3, 1}));    // product [b, h, q, k]
    auto g = einsum_as_product("bijk,bjkl->bil");  // two contracted labels: grouped
    ASSERT_TRUE(g);
    EXPECT_EQ(g->k, 2u);
    EXPECT_TRUE(g->needs_grouping());
    EXPECT_EQ(g->perm_b, (perm{0, 1, 2, 3}));
    auto v = einsum_as_product("bi,bij->bj");  // no free label of A
    ASSERT_TRUE(v);
    EXPECT_EQ(v->m, 0u);
    EXPECT_TRUE(v->needs_grouping());
    auto implicit = einsum_as_product("ij,jk");  // output "ik"
    ASSERT_TRUE(implicit);
    EXPECT_EQ(implicit->batch, 0u);
    EXPECT_EQ(implicit->perm_out, (perm{0, 1}));
    auto t = einsum_as_product("ij,jk->ki");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->perm_out, (perm{1, 0}));
}

TEST(einsum_as_product, other_equations_are_not_products) {
    for (const char* eq : {"ii->i", "ij->", "ij,jk,kl->il", "ii,ij->ij", "ij,kl->ijkl", "ij,jk->k", "ij,jk->i",
                           "...ij,...jk->...ik", "ij,jk->iz", "ij,jk->ii", "i,i->i"})
        EXPECT_FALSE(einsum_as_product(eq)) << eq;
}

TEST(onnx_einsum_parse, batched_products_become_matmul) {
    check("B G H I D, B G H J D -> B G H I J", {2, 3, 2, 5, 4}, {2, 3, 2, 6, 4}, true);
    check("B G H I J, B G H J D -> B G H I D", {2, 3, 2, 5, 6}, {2, 3, 2, 6, 4}, true);
    check("BGHID,BGHJD->BGHIJ", {1, 2, 2, 5, 4}, {1, 2, 2, 6, 4}, true);
    check("bij,bjk->bik", {3, 4, 5}, {3, 5, 6}, true);
    check("ij,jk->ik", {4, 5}, {5, 6}, true);
    check("ij,jk", {4, 5}, {5, 6}, true);
    check("ij,jk->ki", {4, 5}, {5, 6}, true);
    check("bhqd,bhkd->bhqk", {2, 3, 5, 4}, {2, 3, 6, 4}, true);
    check("bhqk,bhkd->bhqd", {2, 3, 5, 6}, {2, 3, 6, 4}, true);
    check("bhqd,bhkd->qbkh", {2, 3, 5, 4}, {2, 3, 6, 4}, true);
    check("ibj,bjk->bik", {4, 3, 5}, {3, 5, 6}, true);
    check("bji,bjk->bik", {3, 5, 4}, {3, 5, 6}, true);
}

TEST(onnx_einsum_parse, grouped_labels_reshape_when_static) {
    check("bijk,bjkl->bil", {2, 3, 4, 5}, {2, 4, 5, 6}, true);
    check("bkij,bjkl->lbi", {2, 5, 3, 4}, {2, 4, 5, 6}, true);  // K order differs between A and B
    check("bi,bij->bj", {3, 4}, {3, 4, 5}, true);
    check("bij,bj->bi", {3, 4, 5}, {3, 5}, true);
    check("i,i->", {7}, {7}, true);
    check("ij,ij->", {3, 4}, {3, 4}, true);
    check("aibj,jbkc->kaic", {2, 3, 4, 5}, {5, 4, 3, 2}, true);
}

TEST(onnx_einsum_parse, dynamic_batch) {
    // MaxViT's model declares a symbolic batch: transposes only, no reshape needed.
    check("B G H I D, B G H J D -> B G H I J", {-1, 3, 2, 5, 4}, {-1, 3, 2, 6, 4}, true, {1, 3});
    check("B G H I J, B G H J D -> B G H I D", {-1, 3, 2, 5, 6}, {-1, 3, 2, 6, 4}, true, {1, 3});
    // Grouped static labels beside a dynamic batch: reshape copies the batch dim.
    check("bijk,bjkl->bil", {-1, 3, 4, 5}, {-1, 4, 5, 6}, true, {2, 3});
    // A dynamic free label is one dim of the matmul as it is.
    check("bij,bjk->bik", {2, -1, 5}, {2, 5, 6}, true, {1, 4});
    // Grouping a dynamic label would need a run-time reshape: stays einsum.
    check("bijk,bjkl->bil", {2, -1, 4, 5}, {2, 4, 5, 6}, false, {2, 3});
}

TEST(onnx_einsum_parse, other_equations_stay_einsum) {
    check("ij,kl->ijkl", {2, 3}, {4, 5}, false);  // no contraction
    check("ij,jk->k", {2, 3}, {3, 4}, false);     // i summed over A alone
    check("ii,ij->ij", {3, 3}, {3, 4}, false);    // diagonal
    check("...ij,...jk->...ik", {2, 3, 4}, {2, 4, 5}, false);
    check("bij,bjk->bik", {1, 3, 4}, {2, 4, 5}, false);  // broadcast batch
    check("ij,jk->ik", {3, 1}, {4, 5}, false);           // broadcast contracted label
    // One operand: a diagonal and a sum.
    for (const char* eq : {"ii->i", "ij->"}) {
        onnx_model m;
        m.opset = 12;
        m.input("a", onnx_float, {3, 3});
        m.node("Einsum", {"a"}, {"y"}, {onnx_attr::s("equation", eq)});
        m.output("y", onnx_float);
        EXPECT_TRUE(has_op(m.parse(), "einsum")) << eq;
    }
}
