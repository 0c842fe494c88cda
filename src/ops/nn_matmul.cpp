#include "ops/nn_matmul.hpp"

#include "ops/nn_conv_quant.hpp"
#include "ops/nn_gemm_kernel.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>

namespace kiln::op {

namespace {

bool matmul_type_ok(type t) { return is_float_compute_type(t) || (is_integer(t) && t != type::bool_); }

// Calls f(std::type_identity<A>{}) with the accumulation type for element type t:
// float for float32 and 16-bit floats, double for float64, and uint64 (wrapping, as
// fixed-width integer products do) for integers.
template <class F>
decltype(auto) visit_matmul_compute(type t, const std::string& op_name, F&& f) {
    if (is_integer(t)) return f(std::type_identity<std::uint64_t>{});
    return visit_float_compute(t, op_name, std::forward<F>(f));
}

struct matmul_dims {
    std::size_t m = 1, k = 1, n = 1;
    std::vector<std::size_t> batch;
    std::vector<std::size_t> a_batch_strides, b_batch_strides;  // in matrices; 0 = broadcast
};

matmul_dims make_dims(const std::vector<std::size_t>& a, const std::vector<std::size_t>& b) {
    matmul_dims d;
    const bool a1 = a.size() == 1, b1 = b.size() == 1;
    d.m = a1 ? 1 : a[a.size() - 2];
    d.k = a.back();
    d.n = b1 ? 1 : b.back();
    std::vector<std::size_t> ab(a.begin(), a.end() - (a1 ? 1 : 2));
    std::vector<std::size_t> bb(b.begin(), b.end() - (b1 ? 1 : 2));
    d.batch = broadcast_lens({ab, bb}, "matmul");
    auto strides = [&](const std::vector<std::size_t>& own) {
        std::vector<std::size_t> s(d.batch.size(), 0);
        std::size_t run = 1;
        for (std::size_t i = own.size(); i-- > 0;) {
            const std::size_t at = d.batch.size() - own.size() + i;
            s[at] = own[i] == 1 ? 0 : run;
            run *= own[i];
        }
        return s;
    };
    d.a_batch_strides = strides(ab);
    d.b_batch_strides = strides(bb);
    return d;
}

// y = a b for contiguous a, b of lens al, bl (NumPy matmul), y contiguous.
template <class A>
void batched_matmul(const matmul_dims& d, const A* a, const A* b, A* y) {
    std::size_t batches = 1;
    for (auto x : d.batch) batches *= x;
    std::vector<std::size_t> idx(d.batch.size(), 0);
    for (std::size_t bi = 0; bi < batches; ++bi) {
        std::size_t ao = 0, bo = 0;
        for (std::size_t i = 0; i < idx.size(); ++i) {
            ao += idx[i] * d.a_batch_strides[i];
            bo += idx[i] * d.b_batch_strides[i];
        }
        gemm_kernel<A>(d.m, d.n, d.k, a + ao * d.m * d.k, static_cast<std::ptrdiff_t>(d.k), 1, b + bo * d.k * d.n,
                       static_cast<std::ptrdiff_t>(d.n), y + bi * d.m * d.n, static_cast<std::ptrdiff_t>(d.n), false);
        next_index(idx, d.batch);
    }
}

// x - zero_point as double, row-major. The zero point is one value, one per row
// (`per` = m, stride k) of a / per column of b (`per` = n, stride 1), or any shape that
// broadcasts to x.
std::vector<double> shifted(const std::string& op_name, const argument& x, const argument* zp, bool rows,
                            const matmul_dims& d) {
    auto v = x.to_vector<double>();
    if (zp == nullptr) return v;
    const auto& zs = zp->get_shape();
    auto z = zp->to_vector<double>();
    const auto& xl = x.get_shape().lens();
    if (z.size() == 1) {
        for (auto& e : v) e -= z[0];
    } else if (zs.ndim() == 1 && xl.size() >= 2 && z.size() == (rows ? d.m : d.n)) {
        for (std::size_t i = 0; i < v.size(); ++i) v[i] -= z[rows ? (i / d.k) % d.m : i % d.n];
    } else {
        auto bz = broadcast_to(zs.as_standard(), xl);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] -= z[bz.index(i)];
    }
    (void)op_name;
    return v;
}

void check_zero_point(const std::string& op_name, const std::string& what, const shape& zp, const shape& x,
                      std::size_t per) {
    if (zp.get_type() != x.get_type())
        throw_error(error_code::type, op_name + ": " + what + " " + zp.to_string() + " must have the type of " + x.to_string());
    if (zp.elements() == 1 || (zp.ndim() == 1 && x.ndim() >= 2 && zp.elements() == per)) return;
    try {
        broadcast_to(zp.as_standard(), x.lens());
    } catch (const error&) {
        throw_error(error_code::shape, op_name + ": " + what + " " + zp.to_string() +
                                           " must be one value, one per row/column, or broadcast to " + x.to_string());
    }
}

}  // namespace

std::vector<std::size_t> matmul_lens(const std::string& op_name, const std::vector<std::size_t>& a,
                                     const std::vector<std::size_t>& b) {
    if (a.empty() || b.empty())
        throw_error(error_code::shape, op_name + ": operands must have rank 1 or more (scalars are not allowed)");
    const std::size_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
    if (a.back() != kb) {
        auto str = [](const std::vector<std::size_t>& v) {
            std::string s = "{";
            for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
            return s + "}";
        };
        throw_error(error_code::shape, op_name + ": inner dimensions differ: " + str(a) + " x " + str(b) + " (" +
                                           std::to_string(a.back()) + " vs " + std::to_string(kb) + ")");
    }
    std::vector<std::size_t> ab(a.begin(), a.end() - (a.size() == 1 ? 1 : 2));
    std::vector<std::size_t> bb(b.begin(), b.end() - (b.size() == 1 ? 1 : 2));
    auto out = broadcast_lens({ab, bb}, op_name);
    if (a.size() > 1) out.push_back(a[a.size() - 2]);
    if (b.size() > 1) out.push_back(b.back());
    return out;
}

std::vector<dynamic_dimension> matmul_dyn_dims(const std::string& op_name, const std::vector<dynamic_dimension>& a,
                                               const std::vector<dynamic_dimension>& b) {
    if (a.empty() || b.empty())
        throw_error(error_code::shape, op_name + ": operands must have rank 1 or more (scalars are not allowed)");
    const auto& ka = a.back();
    const auto& kb = b.size() == 1 ? b[0] : b[b.size() - 2];
    if (ka.is_fixed() && kb.is_fixed() && ka.min != kb.min)
        throw_error(error_code::shape, op_name + ": inner dimensions differ (" + std::to_string(ka.min) + " vs " +
                                           std::to_string(kb.min) + ")");
    const std::size_t na = a.size() > 1 ? a.size() - 2 : 0, nb = b.size() > 1 ? b.size() - 2 : 0;
    const std::size_t rank = std::max(na, nb);
    std::vector<dynamic_dimension> out;
    const dynamic_dimension one{1, 1, {}};
    for (std::size_t i = 0; i < rank; ++i) {
        const auto& da = i + na >= rank ? a[i + na - rank] : one;
        const auto& db = i + nb >= rank ? b[i + nb - rank] : one;
        out.push_back(broadcast_dim(da, db, op_name));
    }
    if (a.size() > 1) out.push_back(a[a.size() - 2]);
    if (b.size() > 1) out.push_back(b.back());
    return out;
}

shape matmul::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2);
    check_same_type(name(), inputs);
    if (!matmul_type_ok(inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported");
    if (any_dynamic(inputs))
        return shape::make_dynamic(inputs[0].get_type(), matmul_dyn_dims(name(), inputs[0].to_dynamic_dims(),
                                                                         inputs[1].to_dynamic_dims()));
    return shape(inputs[0].get_type(), matmul_lens(name(), inputs[0].lens(), inputs[1].lens()));
}

argument matmul::compute(const shape& out, const std::vector<argument>& args) const {
    const auto d = make_dims(args[0].get_shape().lens(), args[1].get_shape().lens());
    return visit_matmul_compute(out.get_type(), name(), [&](auto tag) {
        using A = typename decltype(tag)::type;
        auto a = read_as<A>(args[0]);
        auto b = read_as<A>(args[1]);
        return produce<A>(out, [&](A* y) { batched_matmul<A>(d, a.data(), b.data(), y); });
    });
}

shape gemm::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2, 3);
    check_same_type(name(), inputs);
    if (!matmul_type_ok(inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported");
    for (std::size_t i = 0; i < 2; ++i)
        if (!inputs[i].is_tensor() || inputs[i].ndim() != 2)
            throw_error(error_code::shape, name() + ": " + (i ? "B " : "A ") + inputs[i].to_string() + " must be 2-D");
    if (any_dynamic(inputs)) {
        auto a = inputs[0].to_dynamic_dims(), b = inputs[1].to_dynamic_dims();
        const auto& k = a[trans_a ? 0 : 1];
        const auto& kb = b[trans_b ? 1 : 0];
        if (k.is_fixed() && kb.is_fixed() && k.min != kb.min)
            throw_error(error_code::shape, name() + ": inner dimensions differ: A " + inputs[0].to_string() +
                                               " and B " + inputs[1].to_string());
        return shape::make_dynamic(inputs[0].get_type(), {a[trans_a ? 1 : 0], b[trans_b ? 0 : 1]});
    }
    const auto& a = inputs[0].lens();
    const auto& b = inputs[1].lens();
    const std::size_t m = trans_a ? a[1] : a[0], k = trans_a ? a[0] : a[1];
    const std::size_t kb = trans_b ? b[1] : b[0], n = trans_b ? b[0] : b[1];
    if (k != kb)
        throw_error(error_code::shape, name() + ": inner dimensions differ: A " + inputs[0].to_string() +
                                           (trans_a ? " (transposed)" : "") + " and B " + inputs[1].to_string() +
                                           (trans_b ? " (transposed)" : ""));
    if (inputs.size() == 3) {
        try {
            broadcast_to(inputs[2].as_standard(), {m, n});
        } catch (const error&) {
            throw_error(error_code::shape, name() + ": C " + inputs[2].to_string() + " does not broadcast to (" +
                                               std::to_string(m) + ", " + std::to_string(n) + ")");
        }
    }
    return shape(inputs[0].get_type(), {m, n});
}

argument gemm::compute(const shape& out, const std::vector<argument>& args) const {
    const std::size_t m = out.lens()[0], n = out.lens()[1];
    const std::size_t k = args[0].get_shape().lens()[trans_a ? 0 : 1];
    return visit_matmul_compute(out.get_type(), name(), [&](auto tag) {
        using A = typename decltype(tag)::type;
        auto a = read_as<A>(args[0]);
        auto b = read_as<A>(args[1]);
        // The kernel wants rows of B contiguous: transpose B once when needed.
        std::vector<A> bt;
        const A* bp = b.data();
        if (trans_b) {
            bt.resize(k * n);
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t j = 0; j < k; ++j) bt[j * n + i] = b[i * k + j];
            bp = bt.data();
        }
        compute_buffer<A> c;
        shape cs;
        if (args.size() == 3) {
            c = read_as<A>(args[2]);
            cs = broadcast_to(args[2].get_shape().as_standard(), {m, n});
        }
        return produce<A>(out, [&](A* y) {
            gemm_kernel<A>(m, n, k, a.data(), trans_a ? 1 : static_cast<std::ptrdiff_t>(k),
                           trans_a ? static_cast<std::ptrdiff_t>(m) : 1, bp, static_cast<std::ptrdiff_t>(n), y,
                           static_cast<std::ptrdiff_t>(n), false);
            const bool has_c = args.size() == 3 && beta != 0.0f;
            for (std::size_t i = 0; i < m * n; ++i) {
                if constexpr (std::is_integral_v<A>) {
                    // Integer Gemm: alpha and beta are floats; exact when both are 1.
                    const auto acc = static_cast<std::int64_t>(y[i]);
                    const auto cv = has_c ? static_cast<std::int64_t>(c[cs.index(i)]) : 0;
                    if (alpha == 1.0f && (beta == 1.0f || !has_c)) {
                        y[i] = static_cast<A>(acc + cv);
                    } else {
                        const double v = static_cast<double>(alpha) * static_cast<double>(acc) +
                                         static_cast<double>(beta) * static_cast<double>(cv);
                        y[i] = static_cast<A>(convert<std::int64_t>(v));
                    }
                } else {
                    A v = static_cast<A>(alpha) * y[i];
                    if (has_c) v += static_cast<A>(beta) * c[cs.index(i)];
                    y[i] = v;
                }
            }
        });
    });
}

shape matmul_integer::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2 + (has_a_zero_point ? 1 : 0) + (has_b_zero_point ? 1 : 0));
    for (std::size_t i = 0; i < 2; ++i)
        if (inputs[i].get_type() != type::int8 && inputs[i].get_type() != type::uint8)
            throw_error(error_code::type, name() + ": " + (i ? "B " : "A ") + inputs[i].to_string() +
                                              " must be int8 or uint8");
    auto lens = matmul_lens(name(), inputs[0].lens(), inputs[1].lens());
    const auto d = make_dims(inputs[0].lens(), inputs[1].lens());
    std::size_t i = 2;
    if (has_a_zero_point) check_zero_point(name(), "a_zero_point", inputs[i++], inputs[0], d.m);
    if (has_b_zero_point) check_zero_point(name(), "b_zero_point", inputs[i], inputs[1], d.n);
    return shape(type::int32, lens);
}

argument matmul_integer::compute(const shape& out, const std::vector<argument>& args) const {
    const auto d = make_dims(args[0].get_shape().lens(), args[1].get_shape().lens());
    std::size_t i = 2;
    const argument* azp = has_a_zero_point ? &args[i++] : nullptr;
    const argument* bzp = has_b_zero_point ? &args[i] : nullptr;
    auto to_int = [](const std::vector<double>& v) { return std::vector<std::int64_t>(v.begin(), v.end()); };
    auto a = to_int(shifted(name(), args[0], azp, true, d));
    auto b = to_int(shifted(name(), args[1], bzp, false, d));
    return produce<std::int64_t>(out, [&](std::int64_t* y) { batched_matmul<std::int64_t>(d, a.data(), b.data(), y); });
}

shape qlinear_matmul::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 8);
    const auto& a = inputs[0];
    const auto& b = inputs[3];
    for (const shape* s : {&a, &b, &inputs[7]})
        if (!(s->get_type() == type::int8 || s->get_type() == type::uint8 || is_fp8(s->get_type())))
            throw_error(error_code::type, name() + ": " + s->to_string() + " must be an 8-bit integer or float8 type");
    auto lens = matmul_lens(name(), a.lens(), b.lens());
    const auto d = make_dims(a.lens(), b.lens());
    check_zero_point(name(), "a_zero_point", inputs[2], a, d.m);
    check_zero_point(name(), "b_zero_point", inputs[5], b, d.n);
    auto check_scale = [&](std::size_t i, std::size_t per, const char* what) {
        const auto& s = inputs[i];
        if (!is_float(s.get_type()) || !(s.elements() == 1 || s.elements() == per))
            throw_error(error_code::shape, name() + ": " + what + " " + s.to_string() +
                                               " must be one floating-point value or one per row/column");
    };
    check_scale(1, d.m, "a_scale");
    check_scale(4, d.n, "b_scale");
    check_scale(6, 1, "y_scale");
    if (inputs[7].elements() != 1)
        throw_error(error_code::shape, name() + ": y_zero_point " + inputs[7].to_string() + " must be one value");
    return shape(inputs[7].get_type(), lens);
}

argument qlinear_matmul::compute(const shape& out, const std::vector<argument>& args) const {
    const auto d = make_dims(args[0].get_shape().lens(), args[3].get_shape().lens());
    auto a = shifted(name(), args[0], &args[2], true, d);
    auto b = shifted(name(), args[3], &args[5], false, d);
    auto as = args[1].to_vector<double>();
    auto bs = args[4].to_vector<double>();
    const double ys = args[6].get_double(0);
    const double yzp = args[7].get_double(0);
    // Products of 8-bit values are exact in double, so the accumulation is exact.
    std::vector<double> acc(out.elements());
    batched_matmul<double>(d, a.data(), b.data(), acc.data());
    argument r(out.as_standard());
    visit_numeric(out.get_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* y = r.data_as<T>();
        for (std::size_t i = 0; i < acc.size(); ++i) {
            const std::size_t row = (i / d.n) % d.m, col = i % d.n;
            const double v = acc[i] * (as[as.size() == 1 ? 0 : row] * bs[bs.size() == 1 ? 0 : col]) / ys;
            if constexpr (std::is_integral_v<T>) y[i] = saturate_round<T>(v, yzp);
            else y[i] = convert<T>(v + yzp);
        }
    }, name());
    return r;
}

KILN_REGISTER_OP(matmul)
KILN_REGISTER_OP(gemm)
KILN_REGISTER_OP(matmul_integer)
KILN_REGISTER_OP(qlinear_matmul)

}  // namespace kiln::op
