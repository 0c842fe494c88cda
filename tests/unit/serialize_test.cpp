// .kiln round trips: parsed, compiled for ref, dynamic, control flow; atomic saving.
// The corruption and crafted-file tests are in serialize_corrupt_test.cpp.
#include "serialize/crc32c.hpp"
#include "serialize_helpers.hpp"
#include "serialize_test_ops.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/register_op.hpp>
#include <kiln/serialize.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <sys/stat.h>

namespace kiln::test {
KILN_REGISTER_OP(test_add)
KILN_REGISTER_OP(test_scale)
KILN_REGISTER_OP(test_transpose)
KILN_REGISTER_OP(ser_attrs)
KILN_REGISTER_OP(ser_split)
KILN_REGISTER_OP(ser_if)
KILN_REGISTER_OP(ser_unsaveable)

// Used by serialize_corrupt_test.cpp too.
program make_rich_program() {
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {2, 3});
    auto x = m->add_parameter("x", s);
    auto y = m->add_parameter("y", s);
    auto w = m->add_literal(literal(random_float(s, 7)));
    // A literal stored transposed (strides {1, 3}); the view makes it row-major again.
    auto wt_data = random_float(shape(type::float32, {6}), 8);
    auto wt = m->add_literal(literal(shape(type::float32, {3, 2}, {1, 3}), wt_data.data()));
    auto tr = m->add_instruction(test_transpose{}, {wt});
    // A view whose size-1 dimension has a non-row-major stride ([3, 1]{1, 3}): such
    // strides are invisible in the text form but part of the shape.
    auto row = m->add_literal(literal(random_float(shape(type::float32, {1, 3}), 9)));
    auto column = m->add_instruction(test_transpose{}, {row});
    auto a = m->add_instruction(test_add{}, {x, y});
    auto b = m->add_instruction(test_add{}, {a, w});
    auto c = m->add_instruction(test_scale{2.5f}, {b});
    ser_attrs attrs;
    attrs.axis = -3;
    attrs.perm = {2, 0, 1};
    attrs.mode = "linear \xc3\xa9";
    attrs.flag = true;
    attrs.alpha = 0.1;
    attrs.small = 255;
    attrs.target = shape(type::int8, {4, 1}, {1, 0});
    attrs.maybe = -7;
    attrs.nested = {{1.5f}, {}, {2.0f, -0.0f}};
    attrs.inner = test_scale{-4.0f};
    attrs.extra = value{{"k", value{1, "two", 3.0}}};
    auto d = m->add_instruction(attrs, {c});
    auto e = m->add_instruction(test_add{}, {d, tr});
    auto split = m->add_instruction(ser_split{}, {e});
    auto e0 = m->add_instruction(builtin::get_tuple_elem{0}, {split});
    auto e1 = m->add_instruction(builtin::get_tuple_elem{1}, {split});
    auto f = m->add_instruction(test_add{}, {e1, x});
    auto i8 = m->add_literal(literal(shape(type::int8, {3}), std::vector<int>{-128, 0, 127}));
    auto h = m->add_literal(literal(shape(type::float16, {2}), std::vector<float>{1.5f, -65504.0f}));
    auto bl = m->add_literal(literal(shape(type::bool_, {2, 2}), std::vector<bool>{true, false, false, true}));
    auto str = m->add_literal(literal(shape(type::string, {2}), std::vector<std::string>{"", std::string("tok\0en", 6)}));
    auto empty = m->add_literal(literal(shape(type::float32, {0, 3}), std::vector<float>{}));
    auto scalar = m->add_literal(literal(std::int64_t{-42}));
    m->add_return({e0, f, i8, h, bl, str, empty, scalar, column});
    return p;
}

param_map rich_inputs(unsigned seed) {
    shape s(type::float32, {2, 3});
    return {{"x", random_float(s, seed)}, {"y", random_float(s, seed + 1)}};
}

program make_control_flow_program() {
    program p;
    shape s(type::float32, {4});
    auto* then_m = p.create_module("then");
    auto tx = then_m->add_parameter("x", s);
    then_m->add_return({then_m->add_instruction(test_scale{3.0f}, {tx})});
    auto* else_m = p.create_module("else");
    auto ex = else_m->add_parameter("x", s);
    else_m->add_return({else_m->add_instruction(test_add{}, {ex, ex})});
    auto* m = p.get_main_module();
    auto cond = m->add_parameter("cond", shape(type::int32));
    auto x = m->add_parameter("x", s);
    auto r = m->add_instruction(ser_if{}, {cond, x}, {then_m, else_m});
    m->add_return({m->add_instruction(test_scale{0.5f}, {r})});
    return p;
}

namespace {

TEST(serialize, crc32c_known_values) {
    const char* check = "123456789";
    EXPECT_EQ(kiln_file::crc32c(0, check, 9), 0xE3069283u);
    EXPECT_EQ(kiln_file::crc32c_portable(0, check, 9), 0xE3069283u);
    EXPECT_EQ(kiln_file::crc32c(0, "", 0), 0u);
    // Hardware and table versions agree at every length and alignment, and chaining
    // equals one pass.
    std::mt19937 gen(3);
    std::string data(300, '\0');
    for (auto& c : data) c = static_cast<char>(gen());
    for (std::size_t off = 0; off < 9; ++off)
        for (std::size_t n = 0; n + off <= data.size(); n += 7) {
            auto whole = kiln_file::crc32c(0, data.data() + off, n);
            ASSERT_EQ(whole, kiln_file::crc32c_portable(0, data.data() + off, n)) << off << " " << n;
            auto half = kiln_file::crc32c(0, data.data() + off, n / 2);
            ASSERT_EQ(whole, kiln_file::crc32c(half, data.data() + off + n / 2, n - n / 2));
        }
}

TEST(serialize, shapes_read_back_equal) {
    std::vector<shape> shapes{shape(type::float32, {3, 1}, {1, 3}), shape(type::int8, {4, 1}, {1, 0}),
                              shape(type::float16, {2, 3}, {1, 2}), shape(type::float32, {0, 3}, {7, 1}),
                              shape(type::bool_, {5}), shape(type::int64),
                              shape::make_dynamic(type::float32, {{1, 8, {4}}, {3, 3, {}}})};
    shapes.push_back(shape::tuple({shapes[0], shape::sequence(shapes[1]), shape::optional(shapes[2])}));
    for (auto& s : shapes) EXPECT_EQ(shape_from_value(shape_to_value(s)), s) << s;
}

TEST(serialize, round_trip_parsed) {
    temp_dir dir;
    auto p = make_rich_program();
    p.set_metadata(value{{"producer", "kiln-test"},
                         {"numbers", value{std::int64_t{-9223372036854775807LL - 1},
                                           std::numeric_limits<std::uint64_t>::max(), 0.1, -0.0,
                                           std::nan(""), std::numeric_limits<double>::infinity()}},
                         {"blob", value::binary{std::string("\0\1\2\xff", 4)}},
                         {"nothing", nullptr},
                         {"flags", value{true, false}},
                         {"nested", value{{"deeper", value{value{value{1}}}}}}});
    p.set_output_names({"first", "", "third"});
    auto q = round_trip(p, dir);
    expect_same_outputs(p, q, rich_inputs(11));
    EXPECT_EQ(q.get_output_names()[0], "first");
    EXPECT_EQ(q.get_output_names()[1], "output_1");
    // The attributes come back through make_op as the same values.
    auto find = [](const program& prog) {
        for (auto& ins : *prog.get_main_module())
            if (ins.name() == "ser_attrs") return ins.get_operator();
        return operation();
    };
    EXPECT_EQ(find(p), find(q));
    const auto& attrs = find(q).get<ser_attrs>();
    EXPECT_EQ(attrs.perm, (std::vector<std::int64_t>{2, 0, 1}));
    EXPECT_EQ(attrs.target, shape(type::int8, {4, 1}, {1, 0}));
    EXPECT_EQ(attrs.maybe, std::optional<std::int32_t>(-7));
    EXPECT_EQ(attrs.bias, find(p).get<ser_attrs>().bias);
    EXPECT_EQ(attrs.inner, operation(test_scale{-4.0f}));
    EXPECT_EQ(std::signbit(attrs.nested[2][1]), true);
}

TEST(serialize, round_trip_compiled_ref) {
    temp_dir dir;
    for (bool planning : {true, false}) {
        auto p = make_rich_program();
        compile_options o;
        o.fast_math = false;
        o.tf32 = true;  // a gpu option: saved and loaded like the others
        o.threads = 3;
        o.exhaustive_tune = true;
        o.memory_planning = planning;
        p.compile(*get_target("ref"), o);
        auto q = round_trip(p, dir);
        ASSERT_TRUE(q.is_compiled());
        EXPECT_EQ(q.target_name(), "ref");
        expect_same_outputs(p, q, rich_inputs(21));
        // Runs again on its reused arena.
        expect_same_outputs(p, q, rich_inputs(23));
        // And agrees with the parsed program it came from.
        expect_same_outputs(make_rich_program(), q, rich_inputs(25));
    }
}

TEST(serialize, parameter_defaults) {
    temp_dir dir;
    auto p = make_rich_program();
    shape s(type::float32, {2, 3});
    p.set_parameter_default("y", literal(random_float(s, 5)));
    p.compile(*get_target("ref"));
    auto q = round_trip(p, dir);
    param_map only_x{{"x", random_float(s, 6)}};
    expect_same_outputs(p, q, only_x);
}

TEST(serialize, round_trip_control_flow) {
    temp_dir dir;
    for (bool compiled : {false, true}) {
        auto p = make_control_flow_program();
        if (compiled) p.compile(*get_target("ref"));
        auto q = round_trip(p, dir);
        for (int c : {0, 1}) {
            param_map in{{"cond", literal(std::int32_t{c}).get_argument()},
                         {"x", random_float(shape(type::float32, {4}), 30u + static_cast<unsigned>(c))}};
            expect_same_outputs(p, q, in);
        }
    }
}

TEST(serialize, round_trip_dynamic) {
    temp_dir dir;
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 4, {2}}, {3, 3, {}}}));
    m->add_return({m->add_instruction(test_scale{-1.5f}, {m->add_instruction(test_add{}, {x, x})})});
    compile_options o;
    o.threads = 2;
    p.compile(*get_target("ref"), o);
    ASSERT_NE(p.dynamic_source(), nullptr);
    auto q = round_trip(p, dir);
    ASSERT_NE(q.dynamic_source(), nullptr);
    EXPECT_EQ(q.get_compile_options().threads, 2u);
    for (std::size_t n : {3u, 1u, 4u, 3u}) {
        param_map in{{"x", random_float(shape(type::float32, {n, 3}), static_cast<unsigned>(n))}};
        expect_same_outputs(p, q, in);
    }
    EXPECT_THROW(q.eval({{"x", argument(shape(type::float32, {5, 3}))}}), error);
}

TEST(serialize, load_options_device_id) {
    auto p = make_rich_program();
    p.compile(*get_target("ref"));
    auto bytes = save_buffer(p);
    load_options opts;
    opts.device_id = 5;
    EXPECT_EQ(load_buffer(bytes.data(), bytes.size(), opts).get_compile_options().device_id, 5);
    EXPECT_EQ(load_buffer(bytes.data(), bytes.size()).get_compile_options().device_id, 0);
}

// Weights loaded from a file use the file's buffer in place (aligned, shared);
// from a caller's buffer they are copied once into their own aligned memory.
TEST(serialize, literals_are_not_copied_on_load) {
    temp_dir dir;
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {1000, 257});  // not a multiple of 64 bytes: padding is needed
    auto x = m->add_parameter("x", s);
    auto w1 = m->add_literal(literal(random_float(s, 1)));
    auto w2 = m->add_literal(literal(random_float(s, 2)));
    m->add_return({m->add_instruction(test_add{}, {m->add_instruction(test_add{}, {x, w1}), w2})});
    auto q = round_trip(p, dir);
    auto bytes = save_buffer(p);
    auto r = load_buffer(bytes.data(), bytes.size());
    auto literals = [](const program& prog) {
        std::vector<argument> out;
        for (auto& ins : *prog.get_main_module())
            if (ins.is_literal()) out.push_back(ins.get_literal().get_argument());
        return out;
    };
    auto same_owner = [](const argument& a, const argument& b) {
        return !a.buffer().owner_before(b.buffer()) && !b.buffer().owner_before(a.buffer());
    };
    auto lq = literals(q);
    auto lr = literals(r);
    ASSERT_EQ(lq.size(), 2u);
    for (auto& l : lq) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(l.data()) % 64, 0u);
    for (auto& l : lr) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(l.data()) % 64, 0u);
    EXPECT_TRUE(same_owner(lq[0], lq[1]));
    EXPECT_FALSE(same_owner(lr[0], lr[1]));
    expect_same_outputs(p, q, {{"x", random_float(s, 3)}});
}

program make_unsaveable_program() {
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {512, 1024});  // 2 MiB of literal before the failing op
    auto w = m->add_literal(literal(random_float(s, 1)));
    m->add_return({m->add_instruction(ser_unsaveable{}, {w})});
    return p;
}

TEST(serialize, failed_save_leaves_no_file) {
    temp_dir dir;
    const auto path = dir.file("model.kiln");
    auto good = make_rich_program();
    save(good, path);
    const auto before = read_bytes(path);
    try {
        save(make_unsaveable_program(), path);
        FAIL() << "saving an op whose attributes throw succeeded";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("ser_unsaveable"), std::string::npos) << e.what();
    }
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.kiln"});
    EXPECT_EQ(read_bytes(path), before);
    EXPECT_EQ(load(path), good);
    EXPECT_THROW(save_buffer(make_unsaveable_program()), error);

    // Saving a fresh file that fails creates nothing at all.
    EXPECT_THROW(save(make_unsaveable_program(), dir.file("new.kiln")), error);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.kiln"});
}

TEST(serialize, unwritable_destinations_are_io_errors) {
    temp_dir dir;
    auto p = make_rich_program();
    auto expect_io = [&](const std::string& path) {
        try {
            save(p, path);
            FAIL() << "saved to " << path;
        } catch (const error& e) {
            EXPECT_EQ(e.code(), error_code::io) << e.what();
        }
    };
    expect_io(dir.file("missing/dir/p.kiln"));
    expect_io(dir.file(""));
    // A directory in the way: the rename fails after a complete write.
    std::filesystem::create_directory(dir.path / "taken");
    expect_io(dir.file("taken"));
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken"});
    // Not writable even by root.
    expect_io("/proc/kiln_serialize_test.kiln");
    if (::geteuid() != 0) {
        std::filesystem::create_directory(dir.path / "ro");
        ::chmod((dir.path / "ro").c_str(), 0555);
        expect_io(dir.file("ro/p.kiln"));
        ::chmod((dir.path / "ro").c_str(), 0755);
        EXPECT_TRUE(std::filesystem::is_empty(dir.path / "ro"));
    }
}

// Timing of a 100 MB literal; run by hand:
//   kiln_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*large_literal_timing*'
TEST(serialize, DISABLED_large_literal_timing) {
    temp_dir dir;
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {25, 1000, 1000});
    auto x = m->add_parameter("x", s);
    auto w = m->add_literal(literal(random_float(s, 1)));
    m->add_return({m->add_instruction(test_add{}, {x, w})});
    using clock = std::chrono::steady_clock;
    auto ms = [](clock::time_point a, clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
    };
    const auto path = dir.file("big.kiln");
    for (int rep = 0; rep < 3; ++rep) {
        auto t0 = clock::now();
        save(p, path);
        auto t1 = clock::now();
        auto q = load(path);
        auto t2 = clock::now();
        auto bytes = save_buffer(p);
        auto t3 = clock::now();
        auto r = load_buffer(bytes.data(), bytes.size());
        auto t4 = clock::now();
        std::cout << "100 MB literal: save " << ms(t0, t1) << " ms (incl. fsync), load " << ms(t1, t2)
                  << " ms, save_buffer " << ms(t2, t3) << " ms, load_buffer " << ms(t3, t4) << " ms\n";
        EXPECT_EQ(q.get_main_module()->begin()->get_shape(), s);
    }
}

}  // namespace
}  // namespace kiln::test
