// Memory planning, tested on many random DAGs: no two buffers live at the same time
// overlap in the arena, the arena is at least the liveness lower bound, and planned
// programs compute bit-for-bit what unplanned ones do. Liveness is recomputed here
// from the planned module itself, independently of memory_coloring's own analysis.
#include "passes/memory_coloring.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <unordered_map>

using namespace kiln;

namespace {

using lens_t = std::vector<std::size_t>;

// Runs its sub-module on its inputs (parameters "p0", "p1", ...), like a control-flow op
// that knows nothing about memory planning.
struct call_sub {
    std::string name() const { return "core_test_call_sub"; }
    shape compute_shape(const std::vector<shape>&, const std::vector<module_ref>& mods) const {
        if (mods.size() != 1) throw_error(error_code::shape, "core_test_call_sub: one module");
        return mods[0]->get_output_shapes().at(0);
    }
    argument compute(const shape&, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const {
        param_map p;
        for (std::size_t i = 0; i < args.size(); ++i) p["p" + std::to_string(i)] = args[i];
        return run(mods[0], p).at(0);
    }
};

struct node {
    instruction_ref ins;
    lens_t lens;
};

// A random 2-D float32 DAG mixing pointwise (unary and binary), reductions, concat and
// views (transpose, slice, broadcast), with dimensions that may be 0.
struct random_dag {
    program p;
    param_map inputs;
};

// With `in_sub`, the DAG is the body of a sub-module that main calls through call_sub.
random_dag make_random_dag(std::mt19937& rng, bool in_sub = false) {
    random_dag d;
    auto* main = d.p.get_main_module();
    auto* m = in_sub ? d.p.create_module("body") : main;
    std::vector<instruction_ref> main_params;
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    auto dim = [&] { return pick(8) == 0 ? std::size_t{0} : 1 + pick(5); };
    std::vector<node> pool;
    std::uniform_real_distribution<float> val(-3.0f, 3.0f);
    const std::size_t nparams = 1 + pick(3);
    for (std::size_t i = 0; i < nparams; ++i) {
        lens_t l{dim(), dim()};
        shape s(type::float32, l);
        auto name = "x" + std::to_string(i);
        pool.push_back({m->add_parameter(in_sub ? "p" + std::to_string(i) : name, s), l});
        if (in_sub) main_params.push_back(main->add_parameter(name, s));
        argument a(s);
        for (std::size_t k = 0; k < s.elements(); ++k) {
            float v = val(rng);
            a.data_as<float>()[k] = v == 0.0f ? 0.5f : v;
        }
        d.inputs[name] = a;
    }
    const char* unary[] = {"neg", "abs", "relu", "sigmoid", "tanh"};
    const char* binary[] = {"add", "mul", "sub", "max", "min"};
    const std::size_t nops = 4 + pick(20);
    for (std::size_t k = 0; k < nops; ++k) {
        const auto& a = pool[pool.size() - 1 - pick(std::min<std::size_t>(pool.size(), 6))];  // favour recent
        switch (pick(9)) {
            case 0:
            case 1: pool.push_back({m->add_instruction(make_op(unary[pick(5)]), {a.ins}), a.lens}); break;
            case 2:
            case 3: {
                std::vector<const node*> same;
                for (auto& n : pool)
                    if (n.lens == a.lens) same.push_back(&n);
                auto* b = same[pick(same.size())];
                pool.push_back({m->add_instruction(make_op(binary[pick(5)]), {a.ins, b->ins}), a.lens});
                break;
            }
            case 4: {
                std::int64_t axis = static_cast<std::int64_t>(pick(2));
                bool keep = pick(2) == 0;
                lens_t l = a.lens;
                if (keep) l[axis] = 1;
                else l.erase(l.begin() + axis);
                auto r = m->add_instruction(make_op("reduce_sum", {{"axes", {axis}}, {"keepdims", keep}}), {a.ins});
                if (!keep) {  // back to 2-D so the pool stays uniform
                    lens_t u = l;
                    u.insert(u.begin() + axis, 1);
                    r = m->add_instruction(make_op("unsqueeze", {{"axes", {axis}}}), {r});
                    l = u;
                }
                pool.push_back({r, l});
                break;
            }
            case 5: {
                std::size_t axis = pick(2);
                std::vector<const node*> fit;
                for (auto& n : pool)
                    if (n.lens[1 - axis] == a.lens[1 - axis]) fit.push_back(&n);
                auto* b = fit[pick(fit.size())];
                lens_t l = a.lens;
                l[axis] += b->lens[axis];
                pool.push_back({m->add_instruction(make_op("concat", {{"axis", static_cast<std::int64_t>(axis)}}),
                                                   {a.ins, b->ins}),
                                l});
                break;
            }
            case 6:
                pool.push_back({m->add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {a.ins}),
                                lens_t{a.lens[1], a.lens[0]}});
                break;
            case 7: {
                std::size_t axis = pick(2);
                auto len = static_cast<std::int64_t>(a.lens[axis]);
                std::int64_t start = len == 0 ? 0 : static_cast<std::int64_t>(pick(static_cast<std::size_t>(len)));
                std::int64_t end = start + static_cast<std::int64_t>(pick(static_cast<std::size_t>(len - start) + 1));
                lens_t l = a.lens;
                l[axis] = static_cast<std::size_t>(end - start);
                pool.push_back({m->add_instruction(make_op("slice", {{"axes", {static_cast<std::int64_t>(axis)}},
                                                                     {"starts", {start}},
                                                                     {"ends", {end}}}),
                                                   {a.ins}),
                                l});
                break;
            }
            case 8: {
                // Broadcast a row (stride 0 view) to a new number of rows.
                auto row = m->add_instruction(make_op("reduce_sum", {{"axes", {0}}, {"keepdims", true}}), {a.ins});
                lens_t l{1 + pick(4), a.lens[1]};
                auto b = m->add_instruction(
                    make_op("broadcast", {{"dims", {static_cast<std::int64_t>(l[0]), static_cast<std::int64_t>(l[1])}}}),
                    {row});
                pool.push_back({m->add_instruction(make_op(unary[pick(5)]), {b}), l});
                break;
            }
        }
        EXPECT_EQ(pool.back().ins->get_shape().lens(), pool.back().lens) << *m;
    }
    std::vector<instruction_ref> outs{pool.back().ins};
    if (pick(2) == 0) outs.push_back(pool[pool.size() / 2].ins);
    m->add_return(outs);
    if (in_sub) main->add_return({main->add_instruction(call_sub{}, main_params, {m})});
    return d;
}

// Follows output_alias chains back to the `load` (arena buffer) an instruction lives in.
struct planned_buffer {
    std::size_t offset = 0, bytes = 0, begin = 0, end = 0;
};

std::vector<planned_buffer> planned_buffers(const module& m, bool& returned_arena_memory) {
    std::unordered_map<const instruction*, std::size_t> root;
    std::vector<planned_buffer> out;
    returned_arena_memory = false;
    std::size_t i = 0;
    for (auto& ins : m) {
        if (auto* l = ins.get_operator().any_cast<builtin::load>()) {
            EXPECT_EQ(ins.inputs().size(), 1u);
            EXPECT_EQ(ins.inputs()[0]->param_name(), builtin::scratch_parameter);
            EXPECT_EQ(ins.get_shape(), l->s);
            root[&ins] = out.size();
            out.push_back({l->offset, l->s.bytes(), i, i});
        } else if (!ins.is_param() && !ins.is_literal() && !ins.is_return()) {
            auto alias = ins.get_operator().output_alias(to_shapes(ins.inputs()));
            if (alias >= 0) {
                auto it = root.find(&*ins.inputs().at(static_cast<std::size_t>(alias)));
                if (it != root.end()) root[&ins] = it->second;
            }
        }
        for (auto in : ins.inputs()) {
            auto it = root.find(&*in);
            if (it == root.end()) continue;
            out[it->second].end = std::max(out[it->second].end, i);
            if (ins.is_return()) returned_arena_memory = true;
        }
        ++i;
    }
    return out;
}

std::size_t max_live_bytes(const std::vector<planned_buffer>& bufs, std::size_t n) {
    std::size_t best = 0;
    for (std::size_t t = 0; t < n; ++t) {
        std::size_t live = 0;
        for (auto& b : bufs)
            if (b.begin <= t && t <= b.end) live += b.bytes;
        best = std::max(best, live);
    }
    return best;
}

}  // namespace

TEST(core_memory_coloring, random_dags_never_overlap_live_buffers) {
    std::mt19937 rng(20261130);
    std::size_t programs = 0, planned_total = 0, with_zero = 0;
    for (int trial = 0; trial < 600; ++trial) {
        auto d = make_random_dag(rng, trial % 6 == 5);  // one in six inside a called sub-module
        SCOPED_TRACE("trial " + std::to_string(trial) + "\n" + d.p.to_string());
        auto expected = d.p.eval(d.inputs);  // uncompiled reference

        program unplanned = d.p;
        compile_options no_plan;
        no_plan.memory_planning = false;
        unplanned.compile(*get_target("ref"), no_plan);
        auto u = unplanned.eval(d.inputs);

        program planned = d.p;
        planned.compile(*get_target("ref"));
        auto r = planned.eval(d.inputs);
        auto r2 = planned.eval(d.inputs);  // the arena is reused: same results

        ASSERT_EQ(r.size(), expected.size());
        for (std::size_t k = 0; k < r.size(); ++k) {
            EXPECT_EQ(u[k], expected[k]) << "output " << k;
            EXPECT_EQ(r[k], u[k]) << "output " << k << " planned vs unplanned";
            EXPECT_EQ(r2[k], u[k]) << "output " << k << " second run";
        }

        // Every module is planned on its own (a sub-module gets its own arena).
        for (auto* pm_ref : planned.get_modules()) {
            const auto& pm = *pm_ref;
            SCOPED_TRACE("module " + pm.name());
            EXPECT_NO_THROW(pm.validate());
            bool leaked = false;
            auto bufs = planned_buffers(pm, leaked);
            EXPECT_FALSE(leaked) << "an arena buffer reaches the @return";
            auto scratch = const_cast<module&>(pm).get_parameter(builtin::scratch_parameter);
            std::size_t arena = scratch == pm_ref->end() ? 0 : scratch->get_shape().bytes();
            if (pm_ref == planned.get_main_module()) {
                EXPECT_EQ(arena, planned.get_memory_usage().arena_bytes);
            }
            if (bufs.empty()) {
                EXPECT_EQ(arena, 0u);
                continue;
            }
            ++programs;
            planned_total += bufs.size();
            for (std::size_t a = 0; a < bufs.size(); ++a) {
                if (bufs[a].bytes == 0) ++with_zero;
                EXPECT_LE(bufs[a].offset + bufs[a].bytes, arena);
                EXPECT_EQ(bufs[a].offset % 64, 0u);
                for (std::size_t b = a + 1; b < bufs.size(); ++b) {
                    const auto &x = bufs[a], &y = bufs[b];
                    bool live_together = x.begin <= y.end && y.begin <= x.end;
                    bool overlap = x.bytes > 0 && y.bytes > 0 && x.offset < y.offset + y.bytes &&
                                   y.offset < x.offset + x.bytes;
                    EXPECT_FALSE(live_together && overlap)
                        << "buffers @" << x.begin << " [" << x.offset << ", +" << x.bytes << ") live to @" << x.end
                        << " and @" << y.begin << " [" << y.offset << ", +" << y.bytes << ") live to @" << y.end;
                }
            }
            // No plan beats the largest total of simultaneously live buffers.
            auto lower = max_live_bytes(bufs, pm.size());
            EXPECT_GE(arena, lower);
            std::vector<buffer_interval> iv;
            for (auto& b : bufs) iv.push_back({b.bytes, b.begin, b.end, 0});
            EXPECT_EQ(liveness_lower_bound(iv), lower);
            // The planner's own view of the unplanned, lowered module agrees on the buffers.
            auto before = buffer_intervals(*unplanned.get_module(pm.name()));
            std::size_t sum = 0;
            for (auto& b : before) sum += b.bytes;
            std::size_t sum_planned = 0;
            for (auto& b : bufs) sum_planned += b.bytes;
            EXPECT_EQ(before.size(), bufs.size());
            EXPECT_EQ(sum, sum_planned);
        }
    }
    // The generator must actually exercise the planner.
    EXPECT_GT(programs, 400u);
    EXPECT_GT(planned_total, 1500u);
    EXPECT_GT(with_zero, 0u);
}

TEST(core_memory_coloring, assign_offsets_on_random_intervals) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 1000; ++trial) {
        std::size_t n = 1 + rng() % 40;
        std::size_t align = std::size_t{1} << (rng() % 8);
        std::vector<buffer_interval> bufs;
        for (std::size_t i = 0; i < n; ++i) {
            std::size_t begin = rng() % 60;
            std::size_t end = begin + rng() % 20;
            std::size_t bytes = rng() % 7 == 0 ? 0 : 1 + rng() % 5000;
            bufs.push_back({bytes, begin, end, 0});
        }
        auto total = assign_offsets(bufs, align);
        auto lower = liveness_lower_bound(bufs);
        EXPECT_GE(total, lower);
        std::size_t sum_aligned = 0;
        for (auto& b : bufs) sum_aligned += (b.bytes + align - 1) / align * align;
        EXPECT_LE(total, sum_aligned);
        // Independent lower bound, instruction by instruction.
        std::size_t best = 0;
        for (std::size_t t = 0; t < 80; ++t) {
            std::size_t live = 0;
            for (auto& b : bufs)
                if (b.begin <= t && t <= b.end) live += b.bytes;
            best = std::max(best, live);
        }
        EXPECT_EQ(lower, best);
        for (std::size_t a = 0; a < n; ++a) {
            EXPECT_EQ(bufs[a].offset % align, 0u);
            EXPECT_LE(bufs[a].offset + bufs[a].bytes, total);
            for (std::size_t b = a + 1; b < n; ++b) {
                const auto &x = bufs[a], &y = bufs[b];
                if (!(x.begin <= y.end && y.begin <= x.end) || x.bytes == 0 || y.bytes == 0) continue;
                ASSERT_FALSE(x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes)
                    << "trial " << trial << ": " << a << " and " << b;
            }
        }
    }
}

TEST(core_memory_coloring, small_cases_exact) {
    // Disjoint lifetimes share offset 0; overlapping ones stack.
    std::vector<buffer_interval> b{{100, 0, 1, 0}, {100, 2, 3, 0}, {50, 1, 2, 0}};
    auto total = assign_offsets(b, 64);
    EXPECT_EQ(b[0].offset, 0u);
    EXPECT_EQ(b[1].offset, 0u);
    EXPECT_EQ(b[2].offset, 128u);
    EXPECT_EQ(total, 192u);
    EXPECT_EQ(liveness_lower_bound(b), 150u);
    std::vector<buffer_interval> none;
    EXPECT_EQ(assign_offsets(none, 64), 0u);
    EXPECT_EQ(liveness_lower_bound(none), 0u);
    // A buffer whose last use is its own allocation still occupies that instant.
    std::vector<buffer_interval> point{{10, 3, 3, 0}, {10, 3, 5, 0}};
    assign_offsets(point, 1);
    EXPECT_NE(point[0].offset, point[1].offset);
}

TEST(core_memory_coloring, planning_twice_is_a_no_op_and_outputs_are_not_planned) {
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {4, 4});
    auto x = m->add_parameter("x", s);
    auto a = m->add_instruction(make_op("neg"), {x});
    auto b = m->add_instruction(make_op("abs"), {a});
    auto c = m->add_instruction(make_op("add"), {a, b});
    m->add_return({c, m->add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {b})});
    p.compile(*get_target("ref"));
    auto& pm = *p.get_main_module();
    bool leaked = false;
    auto bufs = planned_buffers(pm, leaked);
    EXPECT_FALSE(leaked);
    EXPECT_EQ(bufs.size(), 1u);  // only `a`: `c` and `b` (through the transpose) are returned
    auto text = pm.to_string();
    memory_coloring{}.apply(pm);
    EXPECT_EQ(pm.to_string(), text);
    argument in(s);
    for (int i = 0; i < 16; ++i) in.data_as<float>()[i] = static_cast<float>(i) - 7.5f;
    auto r = p.eval({{"x", in}});
    for (int i = 0; i < 16; ++i) {
        float v = static_cast<float>(i) - 7.5f;
        EXPECT_EQ(r[0].get_double(static_cast<std::size_t>(i)), -v + std::abs(v));
    }
    EXPECT_EQ(r[1].get_double(1), std::abs(4 - 7.5));
}

// plan_results (the gpu target's): the returned buffers are planned too, live to the end.
TEST(core_memory_coloring, plan_results_plans_the_returned_buffers_too) {
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {4, 4});
    auto x = m->add_parameter("x", s);
    auto a = m->add_instruction(make_op("neg"), {x});
    auto b = m->add_instruction(make_op("abs"), {a});
    auto c = m->add_instruction(make_op("add"), {a, b});
    m->add_return({c, m->add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {b})});
    compile_options o;
    o.memory_planning = false;
    p.compile(*get_target("ref"), o);
    auto& pm = *p.get_main_module();
    EXPECT_EQ(buffer_intervals(pm).size(), 1u);
    const auto all = buffer_intervals(pm, true);
    ASSERT_EQ(all.size(), 3u);
    std::size_t last = 0;
    for (const auto& b : all) last = std::max(last, b.end);
    for (const auto& b : all) {
        if (b.begin > all[0].begin) {
            EXPECT_EQ(b.end, last) << "a returned buffer lives to the @return";
        }
    }
    memory_coloring{.plan_results = true}.apply(pm);
    std::size_t loads = 0, allocations = 0;
    for (auto& ins : pm) {
        loads += ins.name() == "load";
        allocations += ins.name() == "allocate";
    }
    EXPECT_EQ(loads, 3u) << pm;
    EXPECT_EQ(allocations, 0u) << pm;
}


TEST(core_memory_coloring, planned_sub_modules_run) {
    program p;
    shape s(type::float32, {3, 4});
    auto* sub = p.create_module("body");
    auto sp = sub->add_parameter("p0", s);
    auto n = sub->add_instruction(make_op("neg"), {sp});
    auto e = sub->add_instruction(make_op("abs"), {n});
    sub->add_return({sub->add_instruction(make_op("add"), {n, e})});  // n and e are planned
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", s);
    auto a = m->add_instruction(make_op("neg"), {x});
    auto c = m->add_instruction(call_sub{}, {a}, {sub});
    m->add_return({m->add_instruction(make_op("mul"), {c, a})});
    argument in(s);
    for (int i = 0; i < 12; ++i) in.data_as<float>()[i] = static_cast<float>(i) - 5.5f;
    auto expected = p.eval({{"x", in}});
    p.compile(*get_target("ref"));
    EXPECT_NE(p.get_module("body")->get_parameter(builtin::scratch_parameter), p.get_module("body")->end())
        << *p.get_module("body");
    auto r = p.eval({{"x", in}});
    EXPECT_EQ(r.at(0), expected.at(0));
    for (int i = 0; i < 12; ++i) {
        float v = -(static_cast<float>(i) - 5.5f);
        EXPECT_EQ(r[0].get_double(static_cast<std::size_t>(i)), (-v + std::abs(v)) * v);
    }
}
