#include "ops/tensor_scan.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

template <bool Prod>
shape cumulative<Prod>::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 1, 64, "x");
    if (!is_integer(in[1].get_type()) || in[1].ndim() > 1)
        throw_error(error_code::type, name() + ": axis must be a 0-D or 1-D integer tensor, got " + in[1].to_string());
    if (in[0].get_type() == type::bool_ || in[0].get_type() == type::string)
        throw_error(error_code::type, name() + ": unsupported element type " + in[0].to_string());
    return in[0].as_standard();
}

template <bool Prod>
argument cumulative<Prod>::compute(const shape& out, const std::vector<argument>& args) const {
    auto ax = read_ints(args[1], name(), "axis");
    if (ax.size() != 1) throw_error(error_code::shape, name() + ": axis must hold one value");
    const auto& l = out.lens();
    auto a = normalize_axis(ax[0], l.size(), name());
    std::size_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= l[d];
    for (std::size_t d = a + 1; d < l.size(); ++d) inner *= l[d];
    const std::size_t len = l[a];
    argument src = args[0].contiguous();
    argument r(out);
    visit_numeric(out.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        using T = compute_t<C>;
        // Integers accumulate modulo 2^64, which wraps exactly like the narrow type would.
        using A = std::conditional_t<std::is_integral_v<T>, std::uint64_t, T>;
        const C* s = src.template data_as<C>();
        C* o = r.template data_as<C>();
        for (std::size_t p = 0; p < outer; ++p)
            for (std::size_t q = 0; q < inner; ++q) {
                A acc = Prod ? A(1) : A(0);
                for (std::size_t step = 0; step < len; ++step) {
                    std::size_t j = reverse ? len - 1 - step : step;
                    std::size_t k = (p * len + j) * inner + q;
                    A x;
                    if constexpr (std::is_integral_v<T>) x = static_cast<A>(static_cast<std::int64_t>(s[k]));
                    else x = convert<T>(s[k]);
                    if (!exclusive) acc = Prod ? A(acc * x) : A(acc + x);
                    if constexpr (std::is_integral_v<T>) o[k] = static_cast<C>(static_cast<T>(acc));
                    else o[k] = convert<C>(acc);
                    if (exclusive) acc = Prod ? A(acc * x) : A(acc + x);
                }
            }
    }, name());
    return r;
}

template struct cumulative<false>;
template struct cumulative<true>;

shape reverse_sequence::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 2, 64, "input");
    auto b = normalize_axis(batch_axis, in[0].ndim(), name());
    auto t = normalize_axis(time_axis, in[0].ndim(), name());
    if (b == t) throw_error(error_code::shape, name() + ": batch_axis and time_axis are the same");
    if (in[1].ndim() != 1 || in[1].lens()[0] != in[0].lens()[b] || !is_integer(in[1].get_type()))
        throw_error(error_code::shape, name() + ": sequence_lens must be an integer vector of the batch size, got " +
                                           in[1].to_string());
    return in[0].as_standard();
}

argument reverse_sequence::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& l = out.lens();
    auto b = normalize_axis(batch_axis, l.size(), name());
    auto t = normalize_axis(time_axis, l.size(), name());
    auto lens = args[1].to_vector<std::int64_t>();
    for (auto n : lens)
        if (n < 0 || n > static_cast<std::int64_t>(l[t]))
            throw_error(error_code::runtime, name() + ": sequence length " + std::to_string(n) + " is outside [0, " +
                                                 std::to_string(l[t]) + "]");
    auto st = shape::standard_strides(l);
    std::vector<std::size_t> idx(l.size(), 0);
    return copy_by_index(out, args[0], [&](std::size_t i) {
        if (i > 0) next_index(idx, l);
        auto n = static_cast<std::size_t>(lens[idx[b]]);
        std::size_t time = idx[t] < n ? n - 1 - idx[t] : idx[t];
        return static_cast<std::int64_t>(i - idx[t] * st[t] + time * st[t]);
    });
}

KILN_REGISTER_OP(cumsum)
KILN_REGISTER_OP(cumprod)
KILN_REGISTER_OP(reverse_sequence)

}  // namespace kiln::op
