#include "ops/tensor_common.hpp"

namespace kiln::op {

shape unknown_dims(type t, std::size_t rank) {
    if (rank == 0) return shape(t);
    return shape::make_dynamic(t, std::vector<dynamic_dimension>(rank, dynamic_dimension{0, dynamic_dimension::unbounded, {}}));
}

std::size_t static_length(const shape& s, const std::string& op_name, const std::string& what) {
    if (!s.is_tensor() || s.ndim() > 1)
        throw_error(error_code::shape, op_name + ": " + what + " must be a 0-D or 1-D tensor, got " + s.to_string());
    if (s.ndim() == 0) return 1;
    auto d = s.to_dynamic_dims()[0];
    if (!d.is_fixed())
        throw_error(error_code::unsupported,
                    op_name + ": the length of " + what + " (" + s.to_string() + ") must be known before running");
    return d.min;
}

void check_dim_value(std::int64_t v, const std::string& op_name, const std::string& what, bool allow_negative) {
    if (v > max_dim || v < (allow_negative ? -max_dim : 0))
        throw_error(error_code::shape, op_name + ": " + what + " " + std::to_string(v) + " is out of range");
}

std::vector<std::int64_t> read_ints(const argument& a, const std::string& op_name, const std::string& what) {
    const auto& s = a.get_shape();
    if (!s.is_tensor() || s.dynamic() || s.ndim() > 1 || !is_integer(s.get_type()))
        throw_error(error_code::type, op_name + ": " + what + " must be a 0-D or 1-D integer tensor, got " + s.to_string());
    return a.to_vector<std::int64_t>();
}

std::vector<double> read_floats(const argument& a) { return a.to_vector<double>(); }

std::vector<std::size_t> row_major_strides(const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> s(lens.size(), 1);
    for (std::size_t i = lens.size(); i-- > 1;) s[i - 1] = s[i] * lens[i];
    return s;
}

}  // namespace kiln::op
