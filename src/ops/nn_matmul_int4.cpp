#include "ops/nn_matmul_int4.hpp"

#include "ops/common.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

std::vector<std::uint8_t> pack_int4(const std::vector<std::int8_t>& values) {
    std::vector<std::uint8_t> out((values.size() + 1) / 2, 0);
    for (std::size_t i = 0; i < values.size(); ++i) {
        const auto nib = static_cast<std::uint8_t>(values[i] & 0x0F);
        out[i / 2] = static_cast<std::uint8_t>(out[i / 2] | (i % 2 == 0 ? nib : nib << 4));
    }
    return out;
}

std::vector<float> dequantize_int4(const std::uint8_t* b, const float* scales, const std::uint8_t* zero_points,
                                   std::size_t k, std::size_t n, std::size_t block_size) {
    std::vector<float> w(k * n);
    for (std::size_t r = 0; r < k; ++r)
        for (std::size_t c = 0; c < n; ++c) {
            const std::size_t si = (r / block_size) * n + c;
            const float z = zero_points ? static_cast<float>(int4_at(zero_points, si)) : 0.0f;
            // DequantizeLinear's float32 steps: (x - zero_point) * scale.
            w[r * n + c] = (static_cast<float>(int4_at(b, r * n + c)) - z) * scales[si];
        }
    return w;
}

shape matmul_int4::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 3, 4);
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].is_tensor() || (i > 0 && inputs[i].dynamic()))
            bad("inputs must be tensors, static but for a's leading dims, got " + inputs[i].to_string());
    if (block_size <= 0) bad("block_size must be positive, got " + std::to_string(block_size));
    const shape& a = inputs[0];
    const shape& sc = inputs[2];
    if (a.get_type() != type::float32 || a.ndim() < 1) bad("a must be a float32 tensor, got " + a.to_string());
    if (sc.get_type() != type::float32 || sc.ndim() != 2) bad("scales must be float32 [blocks, N], got " + sc.to_string());
    auto a_dims = a.to_dynamic_dims();
    if (a_dims.back().min != a_dims.back().max) bad("a's last dim (K) must be fixed, got " + a.to_string());
    const std::size_t k = a_dims.back().min, n = sc.lens()[1];
    const std::size_t blocks = (k + static_cast<std::size_t>(block_size) - 1) / static_cast<std::size_t>(block_size);
    if (sc.lens()[0] != blocks)
        bad("scales " + sc.to_string() + " must have ceil(" + std::to_string(k) + " / " + std::to_string(block_size) +
            ") rows");
    if (inputs[1].get_type() != type::uint8 || inputs[1].elements() != (k * n + 1) / 2)
        bad("b must be uint8 [" + std::to_string((k * n + 1) / 2) + "] (K x N int4 values, two per byte), got " +
            inputs[1].to_string());
    if (inputs.size() > 3 && (inputs[3].get_type() != type::uint8 || inputs[3].elements() != (blocks * n + 1) / 2))
        bad("zero_points must be uint8 [" + std::to_string((blocks * n + 1) / 2) + "] (int4, two per byte), got " +
            inputs[3].to_string());
    if (a.dynamic()) {  // a generic program's: the rows vary
        a_dims.back() = dynamic_dimension{n, n};
        return shape::make_dynamic(type::float32, a_dims);
    }
    auto lens = a.lens();
    lens.back() = n;
    return shape(type::float32, lens);
}

argument matmul_int4::compute(const shape& out, const std::vector<argument>& args) const {
    const auto a = args[0].to_vector<float>();
    const auto b = args[1].contiguous();
    const auto s = args[2].to_vector<float>();
    argument zc;
    if (args.size() > 3) zc = args[3].contiguous();
    const std::size_t k = args[0].get_shape().lens().back(), n = out.lens().back();
    const std::size_t m = k == 0 ? 0 : a.size() / k;
    const auto w = dequantize_int4(b.data_as<std::uint8_t>(), s.data(), args.size() > 3 ? zc.data_as<std::uint8_t>() : nullptr,
                                   k, n, static_cast<std::size_t>(block_size));
    argument result(out);
    float* y = result.data_as<float>();
    std::vector<double> row(n);
    for (std::size_t i = 0; i < m; ++i) {
        std::fill(row.begin(), row.end(), 0.0);
        for (std::size_t r = 0; r < k; ++r) {
            const double x = a[i * k + r];
            for (std::size_t c = 0; c < n; ++c) row[c] += x * w[r * n + c];
        }
        for (std::size_t c = 0; c < n; ++c) y[i * n + c] = static_cast<float>(row[c]);
    }
    return result;
}

KILN_REGISTER_OP(matmul_int4)

}  // namespace kiln::op
