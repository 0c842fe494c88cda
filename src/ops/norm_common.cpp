#include "ops/norm_common.hpp"

#include <kiln/errors.hpp>

namespace kiln::op {

std::vector<double> read_doubles(const argument& a) { return a.to_vector<double>(); }

argument write_doubles(const shape& s, const std::vector<double>& values) {
    argument out(s.as_standard());
    visit_numeric(
        s.get_type(),
        [&](auto tag) {
            using C = typename decltype(tag)::type;
            auto* p = out.data_as<C>();
            for (std::size_t i = 0; i < values.size(); ++i) p[i] = convert<C>(values[i]);
        },
        "write_doubles");
    return out;
}

std::size_t product(const std::vector<std::size_t>& lens, std::size_t begin, std::size_t end) {
    std::size_t p = 1;
    for (std::size_t i = begin; i < end && i < lens.size(); ++i) p *= lens[i];
    return p;
}

axis_split split_at(const std::vector<std::size_t>& lens, std::size_t axis) {
    return {product(lens, 0, axis), lens.at(axis), product(lens, axis + 1, lens.size())};
}

void check_float(const std::string& op_name, const shape& s, const std::string& input_label) {
    if (!is_float(s.get_type()))
        throw_error(error_code::type, op_name + ": " + input_label + " must be a floating-point tensor, got " +
                                          s.to_string());
}

}  // namespace kiln::op
