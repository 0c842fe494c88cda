#include "ops/control_training.hpp"

#include "ops/common.hpp"

#include <kiln/literal.hpp>
#include <kiln/register_op.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace kiln::op {

namespace {

// Checks R, T and `groups` groups of n tensors (X, G, ...) pairwise equal in shape;
// returns n.
std::size_t check_optimizer(const std::string& op, const std::vector<shape>& in, std::size_t groups) {
    if (in.size() < 2 + groups || (in.size() - 2) % groups != 0)
        throw_error(error_code::shape, op + ": expected R, T and " + std::to_string(groups) +
                                           " groups of equally many tensors, got " + std::to_string(in.size()) +
                                           " inputs");
    if (!in[0].is_tensor() || !is_float(in[0].get_type()) || in[0].dynamic() || in[0].elements() != 1)
        throw_error(error_code::shape, op + ": R must be one float value, got " + in[0].to_string());
    if (!in[1].is_tensor() || in[1].get_type() != type::int64 || in[1].dynamic() || in[1].elements() != 1)
        throw_error(error_code::shape, op + ": T must be one int64 value, got " + in[1].to_string());
    std::size_t n = (in.size() - 2) / groups;
    for (std::size_t g = 1; g < groups; ++g)
        for (std::size_t i = 0; i < n; ++i)
            if (!in[2 + g * n + i].same_lens_and_type(in[2 + i]))
                throw_error(error_code::shape, op + ": input " + std::to_string(2 + g * n + i) + " is " +
                                                   in[2 + g * n + i].to_string() + ", expected " + in[2 + i].to_string() +
                                                   " like input " + std::to_string(2 + i));
    for (std::size_t i = 2; i < in.size(); ++i)
        if (!is_float(in[i].get_type())) throw_error(error_code::type, op + ": tensors must be float");
    return n;
}

shape tuple_of(const std::vector<shape>& in, std::size_t n, std::size_t outputs_per_tensor) {
    std::vector<shape> out;
    for (std::size_t k = 0; k < outputs_per_tensor; ++k)
        for (std::size_t i = 0; i < n; ++i) out.push_back(in[2 + i].as_standard());
    return shape::tuple(out);
}

argument make(const shape& s, const std::vector<double>& v) { return literal(s, v).get_argument(); }

}  // namespace

shape adagrad::compute_shape(const std::vector<shape>& in) const {
    auto n = check_optimizer("adagrad", in, 3);
    return tuple_of(in, n, 2);
}

argument adagrad::compute(const shape& out, const std::vector<argument>& args) const {
    const std::size_t n = (args.size() - 2) / 3;
    const double R = args[0].get_double(0);
    const double T = static_cast<double>(args[1].get_int64(0));
    const double r = R / (1.0 + T * decay_factor);
    std::vector<argument> xs, hs;
    for (std::size_t i = 0; i < n; ++i) {
        auto X = args[2 + i].to_vector<double>();
        auto G = args[2 + n + i].to_vector<double>();
        auto H = args[2 + 2 * n + i].to_vector<double>();
        for (std::size_t j = 0; j < X.size(); ++j) {
            double g = norm_coefficient * X[j] + G[j];
            H[j] += g * g;
            X[j] -= r * g / (std::sqrt(H[j]) + epsilon);
        }
        xs.push_back(make(out.sub_shapes()[i], X));
        hs.push_back(make(out.sub_shapes()[n + i], H));
    }
    xs.insert(xs.end(), hs.begin(), hs.end());
    return argument::make_tuple(std::move(xs));
}

shape adam::compute_shape(const std::vector<shape>& in) const {
    auto n = check_optimizer("adam", in, 4);
    return tuple_of(in, n, 3);
}

argument adam::compute(const shape& out, const std::vector<argument>& args) const {
    const std::size_t n = (args.size() - 2) / 4;
    const double R = args[0].get_double(0);
    const auto T = args[1].get_int64(0);
    const double td = static_cast<double>(T);
    const double r = T > 0 ? R * std::sqrt(1.0 - std::pow(double(beta), td)) / (1.0 - std::pow(double(alpha), td)) : R;
    std::vector<argument> xs, vs, hs;
    for (std::size_t i = 0; i < n; ++i) {
        auto X = args[2 + i].to_vector<double>();
        auto G = args[2 + n + i].to_vector<double>();
        auto V = args[2 + 2 * n + i].to_vector<double>();
        auto H = args[2 + 3 * n + i].to_vector<double>();
        for (std::size_t j = 0; j < X.size(); ++j) {
            double g = norm_coefficient * X[j] + G[j];
            V[j] = alpha * V[j] + (1.0 - alpha) * g;
            H[j] = beta * H[j] + (1.0 - beta) * g * g;
            X[j] = (1.0 - norm_coefficient_post) * (X[j] - r * V[j] / (std::sqrt(H[j]) + epsilon));
        }
        xs.push_back(make(out.sub_shapes()[i], X));
        vs.push_back(make(out.sub_shapes()[n + i], V));
        hs.push_back(make(out.sub_shapes()[2 * n + i], H));
    }
    xs.insert(xs.end(), vs.begin(), vs.end());
    xs.insert(xs.end(), hs.begin(), hs.end());
    return argument::make_tuple(std::move(xs));
}

shape momentum::compute_shape(const std::vector<shape>& in) const {
    auto n = check_optimizer("momentum", in, 3);
    return tuple_of(in, n, 2);
}

argument momentum::compute(const shape& out, const std::vector<argument>& args) const {
    const std::size_t n = (args.size() - 2) / 3;
    const double R = args[0].get_double(0);
    const auto T = args[1].get_int64(0);
    const double beta_adj = T > 0 ? beta : 1.0;
    std::vector<argument> xs, vs;
    for (std::size_t i = 0; i < n; ++i) {
        auto X = args[2 + i].to_vector<double>();
        auto G = args[2 + n + i].to_vector<double>();
        auto V = args[2 + 2 * n + i].to_vector<double>();
        for (std::size_t j = 0; j < X.size(); ++j) {
            double g = norm_coefficient * X[j] + G[j];
            V[j] = alpha * V[j] + beta_adj * g;
            X[j] -= nesterov ? R * (g + alpha * V[j]) : R * V[j];
        }
        xs.push_back(make(out.sub_shapes()[i], X));
        vs.push_back(make(out.sub_shapes()[n + i], V));
    }
    xs.insert(xs.end(), vs.begin(), vs.end());
    return argument::make_tuple(std::move(xs));
}

// ---- random ----

shape random_op::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 0, 1);
    if (kind == random_kind::bernoulli && in.empty())
        throw_error(error_code::shape, "random (bernoulli): needs the probabilities input");
    type t = dtype ? *dtype : in.empty() ? type::float32 : in[0].get_type();
    if (!is_float(t) && kind != random_kind::bernoulli)
        throw_error(error_code::type, "random: dtype must be a float type, got " + std::string(type_name(t)));
    if (!in.empty()) {
        if (!in[0].is_tensor()) throw_error(error_code::shape, "random: input must be a tensor");
        if (in[0].dynamic()) return shape::make_dynamic(t, in[0].dyn_dims());
        return shape(t, in[0].lens());
    }
    return shape(t, lens);
}

namespace {
// ONNX gives the seed as a float of any value: whole values in int64's range seed as that
// integer; NaN, infinities and larger values (a float-to-int conversion out of range is
// undefined behaviour) seed with their bit pattern.
std::uint64_t seed_value(float s) {
    if (std::isfinite(s) && std::fabs(s) < 9.2e18f) return static_cast<std::uint64_t>(static_cast<std::int64_t>(s));
    std::uint32_t bits = 0;
    std::memcpy(&bits, &s, sizeof bits);
    return bits;
}
}  // namespace

argument random_op::compute(const shape& out, const std::vector<argument>& args) const {
    std::mt19937_64 gen(seed ? seed_value(*seed) : std::random_device{}());
    std::vector<double> v(out.elements());
    if (kind == random_kind::uniform) {
        std::uniform_real_distribution<double> d(a, b);
        for (auto& x : v) x = d(gen);
    } else if (kind == random_kind::normal) {
        std::normal_distribution<double> d(a, b);
        for (auto& x : v) x = d(gen);
    } else {
        auto p = args.at(0).to_vector<double>();
        std::uniform_real_distribution<double> d(0.0, 1.0);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = d(gen) < p[i] ? 1.0 : 0.0;
    }
    return literal(out, v).get_argument();
}

KILN_REGISTER_OP(adagrad)
KILN_REGISTER_OP(adam)
KILN_REGISTER_OP(momentum)
KILN_REGISTER_OP(random_op)

}  // namespace kiln::op
