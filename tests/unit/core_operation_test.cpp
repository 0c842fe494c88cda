// Unit tests of kiln::operation: attributes from reflect drive printing, equality,
// hashing and serialization; compute_shape errors; make_op; unknown ops.
#include <kiln/builtin_ops.hpp>
#include <kiln/context.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <unordered_set>

using namespace kiln;

namespace core_op_test {

// An op with attributes of several kinds.
struct fancy {
    std::int64_t axis = 0;
    std::vector<std::int64_t> perm;
    std::string mode = "linear";
    bool flag = false;
    float alpha = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.perm, "perm");
        f(self.mode, "mode");
        f(self.flag, "flag");
        f(self.alpha, "alpha");
    }
    std::string name() const { return "core_test_fancy"; }
    op_traits traits() const { return {.pointwise = true, .nondeterministic = true}; }
    shape compute_shape(const std::vector<shape>& in) const {
        if (in.size() != 2 || !in[0].same_lens_and_type(in[1]))
            throw_error(error_code::shape, name() + ": inputs " + (in.empty() ? "" : in[0].to_string()) +
                                               " and " + (in.size() > 1 ? in[1].to_string() : "") + " differ");
        return in[0].as_standard();
    }
    argument compute(const shape& out, const std::vector<argument>& args) const {
        argument r(out);
        auto a = args[0].to_vector<float>();
        auto b = args[1].to_vector<float>();
        for (std::size_t i = 0; i < a.size(); ++i) r.data_as<float>()[i] = alpha * a[i] - b[i];
        return r;
    }
};

// No attributes, no compute, no compute_shape.
struct bare {
    std::string name() const { return "core_test_bare"; }
};

// An op that computes with a context.
struct with_ctx {
    std::string name() const { return "core_test_ctx"; }
    shape compute_shape(const std::vector<shape>& in) const { return in.at(0); }
    argument compute(context& ctx, const shape&, const std::vector<argument>& args) const {
        EXPECT_EQ(ctx.target_name(), "ref");
        return args[0];
    }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

KILN_REGISTER_OP(fancy)

}  // namespace core_op_test

using core_op_test::fancy;

TEST(core_operation, null_op) {
    operation n;
    EXPECT_EQ(n.name(), "@null");
    EXPECT_EQ(n, operation());
    EXPECT_FALSE(n.traits().pointwise);
}

TEST(core_operation, printing_from_reflect) {
    operation plain = fancy{};
    EXPECT_EQ(plain.to_string(), "core_test_fancy{axis=0, perm=[], mode=\"linear\", flag=false, alpha=1}");
    operation set = fancy{-1, {1, 0, 2}, "nearest", true, 0.5f};
    EXPECT_EQ(set.to_string(), "core_test_fancy{axis=-1, perm=[1, 0, 2], mode=\"nearest\", flag=true, alpha=0.5}");
    std::ostringstream os;
    os << set;
    EXPECT_EQ(os.str(), set.to_string());
    EXPECT_EQ(operation(core_op_test::bare{}).to_string(), "core_test_bare");
    EXPECT_EQ(operation(builtin::get_tuple_elem{2}).to_string(), "get_tuple_elem{index=2}");
}

TEST(core_operation, equality_and_hash_follow_attributes) {
    std::vector<operation> ops{fancy{},
                               fancy{1, {}, "linear", false, 1.0f},
                               fancy{0, {0}, "linear", false, 1.0f},
                               fancy{0, {}, "cubic", false, 1.0f},
                               fancy{0, {}, "linear", true, 1.0f},
                               fancy{0, {}, "linear", false, 2.0f},
                               core_op_test::bare{},
                               builtin::get_tuple_elem{0},
                               builtin::get_tuple_elem{1}};
    std::unordered_set<std::size_t> hashes;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        hashes.insert(ops[i].hash());
        for (std::size_t j = 0; j < ops.size(); ++j) EXPECT_EQ(ops[i] == ops[j], i == j) << ops[i] << " " << ops[j];
    }
    EXPECT_EQ(hashes.size(), ops.size());
    operation again = fancy{};
    EXPECT_EQ(again.hash(), ops[0].hash());
    operation copy = ops[3];
    EXPECT_EQ(copy, ops[3]);
}

TEST(core_operation, to_value_and_with_value) {
    operation op = fancy{3, {2, 1}, "x", true, 0.25f};
    value v = op.to_value();
    EXPECT_EQ(v.to_string(), "{axis: 3, perm: [2, 1], mode: \"x\", flag: true, alpha: 0.25}");
    operation back = operation(fancy{}).with_value(v);
    EXPECT_EQ(back, op);
    // with_value leaves the original alone and keeps unspecified attributes.
    operation base = fancy{};
    auto changed = base.with_value(value{{"mode", "cubic"}});
    EXPECT_EQ(base.get<fancy>().mode, "linear");
    EXPECT_EQ(changed.get<fancy>().mode, "cubic");
    EXPECT_EQ(changed.get<fancy>().alpha, 1.0f);
    // Serialization form.
    auto sv = operation_to_value(op);
    EXPECT_EQ(operation_from_value(sv), op);
    EXPECT_THROW(operation(fancy{}).with_value(value{{"axis", "not a number"}}), error);
}

TEST(core_operation, make_op_with_attributes) {
    EXPECT_TRUE(has_op("core_test_fancy"));
    EXPECT_FALSE(has_op("core_test_no_such"));
    auto names = get_operator_names();
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    EXPECT_NE(std::find(names.begin(), names.end(), "core_test_fancy"), names.end());
    auto op = make_op("core_test_fancy", {{"axis", 2}, {"perm", {0, 1}}, {"alpha", 3.0}});
    EXPECT_EQ(op, operation(fancy{2, {0, 1}, "linear", false, 3.0f}));
    EXPECT_EQ(make_op("core_test_fancy"), operation(fancy{}));
    EXPECT_EQ(op.name(), "core_test_fancy");
    EXPECT_TRUE(op.traits().pointwise);
    EXPECT_TRUE(op.traits().nondeterministic);
}

TEST(core_operation, unknown_op_names_itself) {
    try {
        (void)make_op("core_test_no_such");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);
        EXPECT_NE(e.message().find("'core_test_no_such'"), std::string::npos) << e.what();
    }
}

TEST(core_operation, any_cast_and_get) {
    operation op = fancy{7, {}, "linear", false, 1.0f};
    ASSERT_NE(op.any_cast<fancy>(), nullptr);
    EXPECT_EQ(op.any_cast<fancy>()->axis, 7);
    EXPECT_EQ(op.any_cast<core_op_test::bare>(), nullptr);
    try {
        (void)op.get<core_op_test::bare>();
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::runtime);
        EXPECT_NE(e.message().find("core_test_fancy"), std::string::npos);
    }
}

TEST(core_operation, compute_and_capabilities) {
    host_context ctx;
    operation op = fancy{0, {}, "linear", false, 2.0f};
    shape s(type::float32, {3});
    argument a(s), b(s);
    for (int i = 0; i < 3; ++i) {
        a.data_as<float>()[i] = 1.5f + static_cast<float>(i);
        b.data_as<float>()[i] = 0.25f * static_cast<float>(i + 1);
    }
    EXPECT_TRUE(op.has_compute());
    auto r = op.compute(ctx, op.compute_shape({s, s}), {a, b});
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{2.75f, 4.5f, 6.25f}));
    EXPECT_EQ(op.output_alias({s, s}), -1);

    operation bare = core_op_test::bare{};
    EXPECT_FALSE(bare.has_compute());
    try {
        (void)bare.compute(ctx, s, {});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);
        EXPECT_NE(e.message().find("core_test_bare"), std::string::npos);
    }
    EXPECT_THROW((void)bare.compute_shape({s}), error);
    EXPECT_EQ(bare.to_value(), value::make_object());
    EXPECT_EQ(bare.with_value(value{{"x", 1}}), bare);

    operation c = core_op_test::with_ctx{};
    EXPECT_TRUE(c.has_compute());
    EXPECT_EQ(c.output_alias({s}), 0);
    EXPECT_EQ(c.compute(ctx, s, {a}).data(), a.data());
}

TEST(core_operation, compute_shape_error_names_op_and_shapes) {
    operation op = fancy{};
    try {
        (void)op.compute_shape({shape(type::float32, {2, 3}), shape(type::float32, {3, 2})});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(e.message().find("core_test_fancy"), std::string::npos);
        EXPECT_NE(e.message().find("float32[2, 3]"), std::string::npos);
        EXPECT_NE(e.message().find("float32[3, 2]"), std::string::npos);
    }
}

TEST(core_operation, library_ops_name_themselves_and_the_problem_in_errors) {
    // Each message must name the op and what is wrong: the disagreeing shapes (dims), or
    // the bad attribute value and the rank it was checked against.
    struct bad_case {
        operation op;
        std::vector<shape> in;
        std::vector<std::string> must_mention;
    };
    std::vector<bad_case> cases{
        {make_op("add"), {shape(type::float32, {2, 3}), shape(type::float32, {4})}, {"2, 3", "4"}},
        {make_op("concat", {{"axis", 1}}), {shape(type::float32, {2, 3}), shape(type::float32, {5, 3})}, {"2", "5"}},
        {make_op("transpose", {{"perm", {0, 0}}}), {shape(type::float32, {2, 3})}, {"0"}},
        {make_op("reduce_sum", {{"axes", {4}}}), {shape(type::float32, {2, 3})}, {"4", "rank 2"}},
    };
    for (auto& c : cases) {
        try {
            (void)c.op.compute_shape(c.in);
            ADD_FAILURE() << c.op << " accepted bad inputs";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), error_code::shape) << e.what();
            std::string msg = e.message();
            EXPECT_EQ(msg.rfind(c.op.name(), 0), 0u) << msg;  // starts with the op's name
            for (auto& m : c.must_mention) EXPECT_NE(msg.find(m), std::string::npos) << m << " in: " << msg;
        }
    }
}

TEST(core_operation, dynamic_inputs_use_the_static_shape_function) {
    operation op = fancy{};
    auto d = shape::make_dynamic(type::float32, {{1, 16, {}}, {4, 4, {}}});
    auto s = op.compute_shape({d, d});
    ASSERT_TRUE(s.dynamic());
    EXPECT_EQ(s.dyn_dims()[0].min, 1u);
    EXPECT_EQ(s.dyn_dims()[0].max, 16u);
    EXPECT_EQ(s.dyn_dims()[1], (dynamic_dimension{4, 4, {}}));
}

TEST(core_operation, finalize_does_not_change_shared_copies) {
    operation a = fancy{5, {}, "linear", false, 1.0f};
    operation b = a;
    host_context ctx;
    b.finalize(ctx, shape(), {});
    EXPECT_EQ(a, b);  // fancy has no finalize: still equal, and `a` untouched
    EXPECT_EQ(a.get<fancy>().axis, 5);
}
