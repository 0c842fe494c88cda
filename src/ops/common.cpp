#include "ops/common.hpp"

#include <algorithm>

namespace kiln::op {

void check_num_inputs(const std::string& op_name, const std::vector<shape>& inputs, std::size_t min,
                      std::size_t max) {
    if (inputs.size() < min || inputs.size() > max) {
        std::string want = min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max);
        throw_error(error_code::shape, op_name + ": expected " + want + " inputs, got " + std::to_string(inputs.size()));
    }
}

void check_same_type(const std::string& op_name, const std::vector<shape>& inputs) {
    for (std::size_t i = 1; i < inputs.size(); ++i)
        if (inputs[i].get_type() != inputs[0].get_type())
            throw_error(error_code::type, op_name + ": input " + std::to_string(i) + " has element type " +
                                              std::string(type_name(inputs[i].get_type())) + ", expected " +
                                              std::string(type_name(inputs[0].get_type())) + " like input 0");
}

void check_rank(const std::string& op_name, const shape& s, std::size_t min_rank, std::size_t max_rank,
                const std::string& input_label) {
    if (!s.is_tensor()) throw_error(error_code::shape, op_name + ": " + input_label + " must be a tensor, got " + s.to_string());
    if (s.ndim() < min_rank || s.ndim() > max_rank)
        throw_error(error_code::shape, op_name + ": " + input_label + " has rank " + std::to_string(s.ndim()) +
                                           " (" + s.to_string() + "), expected rank " +
                                           (min_rank == max_rank ? std::to_string(min_rank)
                                                                 : std::to_string(min_rank) + " to " + std::to_string(max_rank)));
}

std::size_t normalize_axis(std::int64_t axis, std::size_t rank, const std::string& op_name) {
    auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r)
        throw_error(error_code::shape, op_name + ": axis " + std::to_string(axis) + " is out of range for rank " +
                                           std::to_string(rank));
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

std::vector<std::size_t> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank,
                                        const std::string& op_name) {
    std::vector<std::size_t> out;
    for (auto a : axes) {
        auto n = normalize_axis(a, rank, op_name);
        if (std::find(out.begin(), out.end(), n) != out.end())
            throw_error(error_code::shape, op_name + ": axis " + std::to_string(a) + " is repeated");
        out.push_back(n);
    }
    return out;
}

std::vector<std::size_t> broadcast_lens(const std::vector<std::vector<std::size_t>>& lens, const std::string& op_name) {
    std::size_t rank = 0;
    for (auto& l : lens) rank = std::max(rank, l.size());
    std::vector<std::size_t> out(rank, 1);
    for (auto& l : lens) {
        auto off = rank - l.size();
        for (std::size_t i = 0; i < l.size(); ++i) {
            auto& o = out[off + i];
            if (l[i] == o || l[i] == 1) continue;
            if (o == 1) {
                o = l[i];
                continue;
            }
            std::string desc;
            for (auto& x : lens) {
                desc += desc.empty() ? "{" : ", {";
                for (std::size_t k = 0; k < x.size(); ++k) desc += (k ? ", " : "") + std::to_string(x[k]);
                desc += "}";
            }
            throw_error(error_code::shape, op_name + ": shapes " + desc + " cannot be broadcast together");
        }
    }
    return out;
}

shape broadcast_to(const shape& s, const std::vector<std::size_t>& lens) {
    const auto& sl = s.lens();
    const auto& ss = s.strides();
    if (sl.size() > lens.size())
        throw_error(error_code::shape, "cannot broadcast " + s.to_string() + " to a lower rank");
    std::vector<std::size_t> strides(lens.size(), 0);
    auto off = lens.size() - sl.size();
    for (std::size_t i = 0; i < sl.size(); ++i) {
        if (sl[i] == lens[off + i]) strides[off + i] = ss[i];
        else if (sl[i] == 1) strides[off + i] = 0;
        else throw_error(error_code::shape, "cannot broadcast " + s.to_string() + " to the requested dims");
    }
    return shape(s.get_type(), lens, strides);
}

bool next_index(std::vector<std::size_t>& idx, const std::vector<std::size_t>& lens) {
    for (std::size_t i = idx.size(); i-- > 0;) {
        if (++idx[i] < lens[i]) return true;
        idx[i] = 0;
    }
    return false;
}

std::vector<std::int64_t> to_int64_vector(const argument& a) {
    const auto& s = a.get_shape();
    if (!is_integer(s.get_type()))
        throw_error(error_code::type, "expected an integer tensor, got " + s.to_string());
    return a.to_vector<std::int64_t>();
}

}  // namespace kiln::op
