// Unit tests of kiln::argument: owned and borrowed buffers, views (transposed,
// broadcast, sliced, reshaped), tuples/sequences/optionals, equality, zero-sized
// tensors and scalars, and the per-thread allocation limit, carried to a thread that runs an
// eval for the caller.
#include "core/buffer_recycler.hpp"

#include <kiln/allocation_limit.hpp>
#include <kiln/argument.hpp>
#include <kiln/literal.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <thread>

using namespace kiln;

namespace {
using lens_t = std::vector<std::size_t>;

// A standard float32 argument holding 1.5, 2.5, ... (non-zero, distinct).
argument iota(const lens_t& lens, float start = 1.5f) {
    argument a(shape(type::float32, lens));
    auto n = a.get_shape().elements();
    for (std::size_t i = 0; i < n; ++i) a.data_as<float>()[i] = start + static_cast<float>(i);
    return a;
}
}  // namespace

TEST(core_argument, owned_buffer_is_zeroed_aligned_and_shared) {
    argument a(shape(type::int32, {3, 5}));
    ASSERT_NE(a.data(), nullptr);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
    EXPECT_EQ(a.to_vector<int>(), std::vector<int>(15, 0));
    EXPECT_EQ(a.location(), memory_location::host);
    EXPECT_EQ(a.device_id(), 0);
    // Copies share the buffer.
    argument b = a;
    b.data_as<std::int32_t>()[4] = 9;
    EXPECT_EQ(a.get_int64(4), 9);
    EXPECT_EQ(a.buffer().get(), b.buffer().get());
    EXPECT_GE(a.buffer().use_count(), 2);
    // copy() is deep.
    argument c = a.copy();
    c.data_as<std::int32_t>()[4] = 1;
    EXPECT_EQ(a.get_int64(4), 9);
    EXPECT_NE(c.data(), a.data());
}

// for_overwrite: the same aligned, owned buffer without the zeros; strings and tuples as
// argument(s) makes them.
TEST(core_argument, for_overwrite_allocates_without_zeroing) {
    auto a = argument::for_overwrite(shape(type::float32, {4, 7}));
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(a.get_shape(), shape(type::float32, {4, 7}));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
    a.data_as<float>()[27] = 2.5f;  // the whole buffer is its own
    EXPECT_EQ(a.to_vector<float>().back(), 2.5f);
    auto s = argument::for_overwrite(shape(type::string, {2}));
    EXPECT_EQ(s.to_vector<std::string>(), (std::vector<std::string>{"", ""}));
    auto t = argument::for_overwrite(shape::tuple({shape(type::int64, {2})}));
    ASSERT_EQ(t.elements().size(), 1u);
    EXPECT_EQ(t.elements()[0].to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0}));
}

TEST(core_argument, default_is_empty) {
    argument a;
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_FALSE(argument(shape(type::float32, {0})).empty());
    // Comparing data-less arguments must not read memory.
    EXPECT_EQ(a, argument());
    EXPECT_NE(a, argument(shape()));
    EXPECT_EQ(a.to_string(), "float32[] <no data>");
}

TEST(core_argument, shared_buffer_constructor) {
    auto buf = allocate_buffer(type::float64, 4);
    reinterpret_cast<double*>(buf.get())[2] = 3.25;
    argument a(shape(type::float64, {4}), buf);
    EXPECT_EQ(a.data(), buf.get());
    EXPECT_EQ(a.get_double(2), 3.25);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.get()) % 64, 0u);
}

TEST(core_argument, borrowed_memory_is_not_owned) {
    std::vector<float> mine{1, 2, 3, 4, 5, 6};
    {
        auto a = argument::borrow(shape(type::float32, {2, 3}), mine.data());
        EXPECT_EQ(a.data(), reinterpret_cast<char*>(mine.data()));
        EXPECT_EQ(a.to_vector<float>(), mine);
        a.data_as<float>()[5] = -6;  // writes go to the caller's memory
        auto copy = a.copy();
        EXPECT_NE(copy.data(), a.data());
        EXPECT_EQ(copy, a);
    }  // the argument does not free the caller's vector
    EXPECT_EQ(mine[5], -6.0f);
    auto dev = argument::borrow(shape(type::float32, {6}), mine.data(), memory_location::device, 3);
    EXPECT_EQ(dev.location(), memory_location::device);
    EXPECT_EQ(dev.device_id(), 3);
    EXPECT_EQ(dev.to_string(), "float32[6] <device>");
    // Host copies refuse device memory instead of reading it.
    argument host(shape(type::float32, {6}));
    try {
        dev.copy_to(host);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::runtime);
    }
    EXPECT_THROW(host.copy_to(dev), error);
}

TEST(core_argument, transposed_view) {
    auto a = iota({2, 3});  // 1.5 .. 6.5 row-major
    auto t = a.view(shape(type::float32, {3, 2}, {1, 3}));
    EXPECT_EQ(t.data(), a.data());
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, 4.5f, 2.5f, 5.5f, 3.5f, 6.5f}));
    EXPECT_EQ(t.get_double(1), 4.5);
    auto c = t.contiguous();
    EXPECT_TRUE(c.get_shape().standard());
    EXPECT_NE(c.data(), a.data());
    EXPECT_EQ(c.to_vector<float>(), t.to_vector<float>());
    EXPECT_EQ(c, t);  // same lens, type and elements; layouts may differ
    // contiguous() of a standard argument is the argument itself.
    EXPECT_EQ(a.contiguous().data(), a.data());
    // tensor_view addresses through strides.
    tensor_view<float> v{t.data_as<float>(), t.get_shape()};
    EXPECT_EQ(v.at({2, 1}), 6.5f);
    EXPECT_EQ(v.size(), 6u);
}

TEST(core_argument, broadcast_view_stride_zero) {
    auto row = iota({3});
    auto b = row.view(shape(type::float32, {4, 3}, {0, 1}));
    auto v = b.to_vector<float>();
    ASSERT_EQ(v.size(), 12u);
    for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(v[i], 1.5f + static_cast<float>(i % 3));
    auto c = b.copy();
    EXPECT_EQ(c.get_shape(), shape(type::float32, {4, 3}));
    EXPECT_EQ(c.to_vector<float>(), v);
    EXPECT_EQ(c, b);
    // Writing a broadcast destination is not expected; reading a scalar broadcast is.
    auto s = argument(literal(7.0f).get_argument()).view(shape(type::float32, {2, 2}, {0, 0}));
    EXPECT_EQ(s.to_vector<float>(), std::vector<float>(4, 7.0f));
}

TEST(core_argument, sliced_view_with_offset) {
    auto a = iota({4, 5});  // element (r, c) = 1.5 + 5r + c
    // Rows 1..2, columns 2..4: offset 1*5+2 elements.
    auto s = a.view(shape(type::float32, {2, 3}, {5, 1}), (5 + 2) * sizeof(float));
    EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{8.5f, 9.5f, 10.5f, 13.5f, 14.5f, 15.5f}));
    // Writing into the view changes the base.
    argument src = iota({2, 3}, -10.0f);
    src.copy_to(s);
    EXPECT_EQ(a.get_double(7), -10.0);
    EXPECT_EQ(a.get_double(14), -5.0);
    EXPECT_EQ(a.get_double(6), 7.5);   // untouched left of the window
    EXPECT_EQ(a.get_double(10), 11.5);  // untouched below
}

TEST(core_argument, reshape_shares_memory) {
    auto a = iota({2, 6});
    auto r = a.reshape(shape(type::float32, {3, 4}));
    EXPECT_EQ(r.data(), a.data());
    EXPECT_EQ(r.to_vector<float>(), a.to_vector<float>());
    EXPECT_NE(r, a);  // different lens
    r.data_as<float>()[0] = 0;
    EXPECT_EQ(a.get_double(0), 0.0);
}

TEST(core_argument, copy_to_between_layouts_and_errors) {
    auto a = iota({2, 3});
    argument t_buf(shape(type::float32, {6}));
    auto dest = t_buf.view(shape(type::float32, {2, 3}, {1, 2}));  // column-major destination
    a.copy_to(dest);
    EXPECT_EQ(dest, a);
    EXPECT_EQ(t_buf.to_vector<float>(), (std::vector<float>{1.5f, 4.5f, 2.5f, 5.5f, 3.5f, 6.5f}));
    try {
        a.copy_to(argument(shape(type::float32, {3, 2})));
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(e.message().find("float32[2, 3]"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("float32[3, 2]"), std::string::npos) << e.what();
    }
    EXPECT_THROW(a.copy_to(argument(shape(type::float64, {2, 3}))), error);
}

TEST(core_argument, random_views_read_what_index_says) {
    // Random permutations/slices of a random 3-D tensor agree with manual indexing.
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> val(-4.0f, 4.0f);
    for (int trial = 0; trial < 50; ++trial) {
        lens_t base{1 + rng() % 4, 1 + rng() % 4, 1 + rng() % 4};
        argument a(shape(type::float32, base));
        for (std::size_t i = 0; i < a.get_shape().elements(); ++i) a.data_as<float>()[i] = val(rng);
        auto st = a.get_shape().strides();
        std::vector<std::size_t> perm{0, 1, 2};
        std::shuffle(perm.begin(), perm.end(), rng);
        lens_t lens, strides;
        for (auto p : perm) {
            lens.push_back(base[p]);
            strides.push_back(st[p]);
        }
        auto v = a.view(shape(type::float32, lens, strides));
        auto got = v.to_vector<float>();
        std::size_t k = 0;
        for (std::size_t i = 0; i < lens[0]; ++i)
            for (std::size_t j = 0; j < lens[1]; ++j)
                for (std::size_t l = 0; l < lens[2]; ++l) {
                    std::size_t off = i * strides[0] + j * strides[1] + l * strides[2];
                    ASSERT_EQ(got[k++], a.data_as<float>()[off]);
                }
        EXPECT_EQ(v.copy(), v);
    }
}

// Transposing copies go tile by tile (the source's contiguous dim by the last): permuted views
// of 3-D and 4-D tensors with sizes around and past the 32-element tiles, float and int64,
// come out as indexing says (operator== reads both through their strides).
TEST(core_argument, tiled_transposing_copies_read_what_index_says) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 40; ++trial) {
        const std::size_t rank = 3 + trial % 2;
        lens_t base;
        for (std::size_t d = 0; d < rank; ++d) base.push_back(1 + rng() % (d == 0 ? 3 : 70));
        const auto t = trial % 3 == 0 ? type::int64 : type::float32;
        argument a(shape(t, base));
        const auto n = a.get_shape().elements();
        for (std::size_t i = 0; i < n; ++i) {
            if (t == type::int64) a.data_as<std::int64_t>()[i] = static_cast<std::int64_t>(rng() % 100000);
            else a.data_as<float>()[i] = static_cast<float>(rng() % 100000) * 0.25f;
        }
        std::vector<std::size_t> perm(rank);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        if (trial % 4 == 1) std::swap(perm[rank - 1], perm[1]);  // the channels-last pattern often
        lens_t lens, strides;
        for (auto p : perm) {
            lens.push_back(base[p]);
            strides.push_back(a.get_shape().strides()[p]);
        }
        auto v = a.view(shape(t, lens, strides));
        auto c = v.copy();
        ASSERT_TRUE(c.get_shape().standard());
        EXPECT_EQ(c, v) << v.get_shape();
    }
}

// copy() walks rows of the last dim: a channels-last 4-D result, a broadcast view and a
// scalar come out as manual indexing says.
TEST(core_argument, copies_of_channels_last_broadcast_and_scalar_views) {
    const lens_t lens{2, 5, 3, 4};
    argument nhwc(shape(type::float32, lens, {60, 1, 20, 5}));
    for (std::size_t i = 0; i < 120; ++i) nhwc.data_as<float>()[i] = static_cast<float>(i) * 0.5f - 7.0f;
    auto c = nhwc.copy();
    ASSERT_TRUE(c.get_shape().standard());
    std::size_t k = 0;
    for (std::size_t n = 0; n < 2; ++n)
        for (std::size_t ch = 0; ch < 5; ++ch)
            for (std::size_t h = 0; h < 3; ++h)
                for (std::size_t w = 0; w < 4; ++w)
                    ASSERT_EQ(c.data_as<float>()[k++], nhwc.data_as<float>()[n * 60 + ch + h * 20 + w * 5]);
    argument row(shape(type::int64, {3}));
    for (std::int64_t i = 0; i < 3; ++i) row.data_as<std::int64_t>()[i] = 10 + i;
    auto b = row.view(shape(type::int64, {2, 3}, {0, 1})).copy();
    EXPECT_EQ(b.to_vector<std::int64_t>(), (std::vector<std::int64_t>{10, 11, 12, 10, 11, 12}));
    argument one(shape(type::float64, std::vector<std::size_t>{}));
    one.data_as<double>()[0] = 2.25;
    EXPECT_EQ(one.view(shape(type::float64, std::vector<std::size_t>{}, std::vector<std::size_t>{})).copy().to_vector<double>(),
              (std::vector<double>{2.25}));
}

TEST(core_argument, tuples_sequences_optionals) {
    auto x = iota({2});
    argument y(shape(type::int64, {3}));
    auto t = argument::make_tuple({x, y});
    EXPECT_TRUE(t.get_shape().is_tuple());
    EXPECT_EQ(t.get_shape(), shape::tuple({x.get_shape(), y.get_shape()}));
    ASSERT_EQ(t.elements().size(), 2u);
    EXPECT_EQ(t.elements()[0].data(), x.data());
    EXPECT_EQ(t.data(), nullptr);
    EXPECT_FALSE(t.empty());
    EXPECT_EQ(t.to_string(), "tuple(float32[2], int64[3]) {2 elements}");
    auto tc = t.copy();
    EXPECT_NE(tc.elements()[0].data(), x.data());
    EXPECT_EQ(tc, t);
    EXPECT_NE(t, argument::make_tuple({x}));
    EXPECT_NE(t, argument::make_tuple({x, iota({3})}));
    // A tuple shape allocates each element.
    argument alloc(shape::tuple({shape(type::int8, {4}), shape(type::float32)}));
    ASSERT_EQ(alloc.elements().size(), 2u);
    EXPECT_NE(alloc.elements()[1].data(), nullptr);

    auto seq = argument::make_sequence(shape(type::float32, {2}), {x, x.copy()});
    EXPECT_TRUE(seq.get_shape().is_sequence());
    EXPECT_EQ(seq.elements().size(), 2u);
    EXPECT_EQ(seq, argument::make_sequence(shape(type::float32, {2}), {x, x}));
    EXPECT_NE(seq, argument::make_sequence(shape(type::float32, {2}), {x}));
    EXPECT_NE(seq, t);
    auto none = argument::make_optional(shape(type::float32, {2}), std::nullopt);
    auto some = argument::make_optional(shape(type::float32, {2}), x);
    EXPECT_TRUE(none.elements().empty());
    EXPECT_EQ(some.elements().size(), 1u);
    EXPECT_NE(none, some);
    EXPECT_FALSE(none.empty());
}

TEST(core_argument, zero_sized) {
    argument z(shape(type::float32, {3, 0}));
    EXPECT_NE(z.data(), nullptr);
    EXPECT_TRUE(z.to_vector<float>().empty());
    EXPECT_EQ(z, argument(shape(type::float32, {3, 0})));
    EXPECT_NE(z, argument(shape(type::float32, {0, 3})));
    EXPECT_EQ(z.copy(), z);
    z.copy_to(argument(shape(type::float32, {3, 0})));  // nothing to copy, no error
    EXPECT_EQ(z.to_string(), "float32[3, 0] {}");
}

TEST(core_argument, scalars_and_types) {
    argument s(shape(type::float16));
    EXPECT_EQ(s.get_shape().elements(), 1u);
    s.data_as<half>()[0] = half(2.5f);
    EXPECT_EQ(s.get_double(0), 2.5);
    EXPECT_EQ(s.get_int64(0), 2);
    EXPECT_EQ(s.to_string(), "float16[] {2.5}");
    argument b(shape(type::bool_, {3}));
    b.data_as<bool>()[1] = true;
    EXPECT_EQ(b.to_string(), "bool[3] {false, true, false}");
    EXPECT_EQ(b.to_vector<int>(), (std::vector<int>{0, 1, 0}));
    argument i8(shape(type::int8, {2}));
    i8.data_as<std::int8_t>()[0] = -5;
    EXPECT_EQ(i8.to_string(), "int8[2] {-5, 0}");
    argument str(shape(type::string, {2}));
    str.data_as<std::string>()[0] = "hi";
    EXPECT_EQ(str.to_string(), "string[2] {\"hi\", \"\"}");
    EXPECT_EQ(str.to_vector<std::string>(), (std::vector<std::string>{"hi", ""}));
    EXPECT_THROW((void)str.get_double(0), error);
    EXPECT_THROW((void)str.to_vector<float>(), error);
    EXPECT_EQ(str.copy(), str);
    auto big = iota({20});
    EXPECT_EQ(big.to_string(3), "float32[20] {1.5, 2.5, 3.5, ...}");
}

TEST(core_argument, equality_is_bitwise) {
    argument a(shape(type::float32, {3}));
    argument b(shape(type::float32, {3}));
    a.data_as<float>()[0] = std::nanf("1");
    b.data_as<float>()[0] = std::nanf("1");
    EXPECT_EQ(a, b);  // NaNs equal by bits
    b.data_as<float>()[1] = -0.0f;
    EXPECT_NE(a, b);  // -0 differs from +0 bitwise
    EXPECT_NE(argument(shape(type::int32, {3})), argument(shape(type::uint32, {3})));
    EXPECT_NE(argument(shape(type::int32, {3})), argument(shape(type::int32, {1, 3})));
}

TEST(core_argument, empty_sequences_and_optionals_keep_their_element_type) {
    auto fseq = argument::make_sequence(shape(type::float32, {2}), {});
    auto iseq = argument::make_sequence(shape(type::int64, {2}), {});
    EXPECT_EQ(fseq, argument::make_sequence(shape(type::float32, {2}), {}));
    EXPECT_NE(fseq, iseq);
    auto fnone = argument::make_optional(shape(type::float32, {2}), std::nullopt);
    auto inone = argument::make_optional(shape(type::int8, {2}), std::nullopt);
    EXPECT_EQ(fnone, argument::make_optional(shape(type::float32, {2}), std::nullopt));
    EXPECT_NE(fnone, inone);
    EXPECT_NE(fnone, fseq);
}

// allocation_limit caps each buffer allocated on this thread while it lives; limits nest
// (the smallest applies) and other threads are not affected.
TEST(core_argument, allocation_limit_caps_buffers_on_this_thread) {
    {
        kiln::allocation_limit cap(4096);
        EXPECT_NO_THROW(kiln::argument(kiln::shape(kiln::type::float32, {1024})));
        try {
            kiln::argument(kiln::shape(kiln::type::float32, {1025}));
            ADD_FAILURE() << "1025 floats allocated under a 4096-byte limit";
        } catch (const kiln::error& e) {
            EXPECT_EQ(e.code(), kiln::error_code::out_of_memory);
            EXPECT_NE(std::string(e.what()).find("4096"), std::string::npos) << e.what();
        }
        {
            kiln::allocation_limit wider(1 << 20);  // the smaller limit still applies
            EXPECT_THROW(kiln::argument(kiln::shape(kiln::type::float32, {2048})), kiln::error);
        }
        std::thread other([] { EXPECT_NO_THROW(kiln::argument(kiln::shape(kiln::type::float32, {1 << 16}))); });
        other.join();
    }
    EXPECT_NO_THROW(kiln::argument(kiln::shape(kiln::type::float32, {1 << 16})));
}

// An eval's thread state (core/buffer_recycler.hpp) carries the calling thread's allocation
// limit and recycler to a thread that runs the eval for it, and its fresh allocations back.
TEST(core_argument, an_eval_thread_state_carries_the_limit_and_the_recycler_across_threads) {
    kiln::detail::buffer_recycler recycler;
    kiln::detail::recycling_scope recycling(&recycler);
    kiln::allocation_limit cap(4096);
    kiln::detail::eval_thread_state here;
    bool capped = false;
    kiln::detail::buffer_recycler* seen = nullptr;
    const auto before = kiln::detail::fresh_allocations();
    std::thread other([&] {
        kiln::detail::eval_thread_state::scope there(here);
        seen = kiln::detail::active_recycler();
        kiln::argument small(kiln::shape(kiln::type::float32, {16}));
        try {
            kiln::argument(kiln::shape(kiln::type::float32, {1025}));
        } catch (const kiln::error& e) {
            capped = e.code() == kiln::error_code::out_of_memory;
        }
    });
    other.join();
    EXPECT_TRUE(capped) << "the other thread allocated past the caller's limit";
    EXPECT_EQ(seen, &recycler);
    EXPECT_EQ(kiln::detail::fresh_allocations(), before) << "counted before settle()";
    here.settle();
    EXPECT_EQ(kiln::detail::fresh_allocations(), before + 1);
}

// Tensors of several MiB sit on 2 MiB boundaries (so the kernel can back them with huge pages),
// smaller ones on 64 bytes; all start zeroed.
TEST(core_argument, large_buffers_are_huge_page_aligned_and_zeroed) {
    kiln::argument big(kiln::shape(kiln::type::float32, {3, 1024, 1024}));  // 12 MiB
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data()) % (std::uintptr_t(2) << 20), 0u);
    const auto* f = reinterpret_cast<const float*>(big.data());
    EXPECT_EQ(std::count(f, f + 3 * 1024 * 1024, 0.0f), 3 * 1024 * 1024);
    kiln::argument small(kiln::shape(kiln::type::float32, {5}));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.data()) % 64, 0u);
}
