#include "ops/control_signal.hpp"

#include "ops/common.hpp"

#include <kiln/literal.hpp>
#include <kiln/register_op.hpp>

#include <cmath>
#include <complex>

namespace kiln::op {

namespace {

using cplx = std::complex<double>;

constexpr double two_pi = 6.283185307179586476925286766559;

// e^{sign * 2 pi i * m k / n}, with m k reduced mod n first for accuracy.
cplx twiddle(std::size_t m, std::size_t k, std::size_t n, double sign) {
    double a = two_pi * static_cast<double>((m * k) % n) / static_cast<double>(n);
    return {std::cos(a), sign * std::sin(a)};
}

// out[m] = sum_k in[k] e^{-+2 pi i m k / n} for m < out.size(); in shorter than n is zero-padded.
void transform(const std::vector<cplx>& in, std::size_t n, bool inverse, std::vector<cplx>& out) {
    const double sign = inverse ? 1.0 : -1.0;
    const std::size_t used = std::min(in.size(), n);
    for (std::size_t m = 0; m < out.size(); ++m) {
        cplx s = 0;
        for (std::size_t k = 0; k < used; ++k) s += in[k] * twiddle(m, k, n, sign);
        out[m] = inverse ? s / static_cast<double>(n) : s;
    }
}

std::int64_t scalar_of(const argument& a, const std::string& what) {
    if (!a.get_shape().is_tensor() || a.get_shape().elements() != 1)
        throw_error(error_code::shape, what + " must be a scalar, got " + a.get_shape().to_string());
    return a.get_int64(0);
}

dynamic_dimension fixed(std::size_t n) { return {n, n, {}}; }
dynamic_dimension any_size() { return {0, dynamic_dimension::unbounded, {}}; }

}  // namespace

// ---- DFT ----

namespace {
std::size_t dft_axis(std::int64_t a, std::size_t rank) {
    auto r = static_cast<std::int64_t>(rank);
    if (a < 0) a += r;
    if (a < 0 || a >= r - 1)
        throw_error(error_code::invalid_argument, "dft: axis " + std::to_string(a) + " is out of range for rank " +
                                                      std::to_string(rank));
    return static_cast<std::size_t>(a);
}
}  // namespace

shape dft::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs("dft", in, 1 + (length_input ? 1 : 0) + (axis_input ? 1 : 0));
    const auto& x = in[0];
    if (!x.is_tensor() || !is_float(x.get_type()))
        throw_error(error_code::type, "dft: input must be a float tensor, got " + x.to_string());
    if (x.ndim() < 2) throw_error(error_code::shape, "dft: input must have rank 2 or more, got " + x.to_string());
    auto dims = x.to_dynamic_dims();
    const auto& last = dims.back();
    if (last.is_fixed() && last.min != 1 && last.min != 2)
        throw_error(error_code::shape, "dft: the last dimension must be 1 (real) or 2 (complex), got " + x.to_string());
    dims.back() = fixed(inverse && onesided ? 1 : 2);
    const bool same_length = !length_input && dft_length < 0 && !onesided;
    if (axis_input) {
        // Which dimension changes is known at run time only.
        if (!same_length)
            for (std::size_t i = 0; i + 1 < dims.size(); ++i) dims[i] = any_size();
        return shape::make_dynamic(x.get_type(), dims);
    }
    auto ax = dft_axis(axis, dims.size());
    dynamic_dimension len = dims[ax];
    if (length_input) len = any_size();
    else if (dft_length > 0) len = fixed(static_cast<std::size_t>(dft_length));
    else if (inverse && onesided && len.is_fixed()) len = fixed(2 * (len.min - 1));
    else if (inverse && onesided) len = any_size();
    if (!inverse && onesided) len = len.is_fixed() ? fixed(len.min / 2 + 1) : any_size();
    dims[ax] = len;
    return shape::make_dynamic(x.get_type(), dims);
}

argument dft::compute(const shape&, const std::vector<argument>& args) const {
    const auto& xs = args[0].get_shape();
    const auto lens = xs.lens();
    const std::size_t rank = lens.size();
    std::size_t next = 1;
    std::int64_t len_value = dft_length;
    if (length_input) len_value = scalar_of(args[next++], "dft: dft_length");
    const std::size_t ax = dft_axis(axis_input ? scalar_of(args[next], "dft: axis") : axis, rank);
    const std::size_t chans = lens.back();
    const std::size_t n = lens[ax];
    std::size_t L = n;
    if (len_value > 0) L = static_cast<std::size_t>(len_value);
    else if (length_input) throw_error(error_code::invalid_argument, "dft: dft_length must be positive");
    else if (inverse && onesided) L = 2 * (n - 1);
    if (L == 0) throw_error(error_code::invalid_argument, "dft: the transform length must be positive");
    const bool irfft = inverse && onesided;
    const std::size_t out_len = irfft ? L : (onesided ? L / 2 + 1 : L);
    auto out_lens = lens;
    out_lens[ax] = out_len;
    out_lens.back() = irfft ? 1 : 2;
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < ax; ++i) outer *= lens[i];
    for (std::size_t i = ax + 1; i + 1 < rank; ++i) inner *= lens[i];
    auto x = args[0].to_vector<double>();
    std::vector<double> y(outer * out_len * inner * out_lens.back());
    std::vector<cplx> seq, res(out_len);
    for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t i = 0; i < inner; ++i) {
            auto at = [&](std::size_t k) {
                std::size_t base = ((o * n + k) * inner + i) * chans;
                return cplx(x[base], chans == 2 ? x[base + 1] : 0.0);
            };
            seq.assign(irfft ? L : n, 0.0);
            if (irfft) {
                // Rebuild the full spectrum from its first half (Hermitian symmetry).
                for (std::size_t k = 0; k < L; ++k) {
                    std::size_t kk = k <= L / 2 ? k : L - k;
                    cplx v = kk < n ? at(kk) : 0.0;
                    seq[k] = k <= L / 2 ? v : std::conj(v);
                }
            } else {
                for (std::size_t k = 0; k < n; ++k) seq[k] = at(k);
            }
            transform(seq, L, inverse, res);
            for (std::size_t m = 0; m < out_len; ++m) {
                std::size_t base = ((o * out_len + m) * inner + i) * out_lens.back();
                y[base] = res[m].real();
                if (!irfft) y[base + 1] = res[m].imag();
            }
        }
    return literal(shape(xs.get_type(), out_lens), y).get_argument();
}

// ---- STFT ----

shape stft::compute_shape(const std::vector<shape>& in) const {
    std::size_t want = 2 + (has_window ? 1 : 0) + (has_frame_length ? 1 : 0);
    check_num_inputs("stft", in, want);
    const auto& s = in[0];
    check_rank("stft", s, 3, 3, "signal");
    if (!is_float(s.get_type())) throw_error(error_code::type, "stft: the signal must be float");
    if (!has_window && !has_frame_length)
        throw_error(error_code::invalid_argument, "stft: needs a window or a frame_length");
    auto dims = s.to_dynamic_dims();
    dynamic_dimension frames = any_size(), bins = any_size();
    if (frame_length > 0) {
        auto fl = static_cast<std::size_t>(frame_length);
        bins = fixed(onesided ? fl / 2 + 1 : fl);
        if (frame_step > 0 && dims[1].is_fixed()) {
            if (dims[1].min < fl) throw_error(error_code::shape, "stft: the signal is shorter than a frame");
            frames = fixed((dims[1].min - fl) / static_cast<std::size_t>(frame_step) + 1);
        }
    }
    return shape::make_dynamic(s.get_type(), {dims[0], frames, bins, fixed(2)});
}

argument stft::compute(const shape&, const std::vector<argument>& args) const {
    const auto& ss = args[0].get_shape();
    const std::size_t batch = ss.lens()[0], len = ss.lens()[1], chans = ss.lens()[2];
    const auto step = scalar_of(args[1], "stft: frame_step");
    if (step <= 0) throw_error(error_code::invalid_argument, "stft: frame_step must be positive");
    std::size_t next = 2;
    std::vector<double> window;
    if (has_window) window = args[next++].to_vector<double>();
    std::size_t fl = window.size();
    if (has_frame_length) {
        auto f = scalar_of(args[next], "stft: frame_length");
        if (f <= 0) throw_error(error_code::invalid_argument, "stft: frame_length must be positive");
        if (has_window && static_cast<std::size_t>(f) != fl)
            throw_error(error_code::invalid_argument, "stft: frame_length differs from the window's length");
        fl = static_cast<std::size_t>(f);
    }
    if (fl == 0 || fl > len) throw_error(error_code::invalid_argument, "stft: bad frame length " + std::to_string(fl));
    const std::size_t frames = (len - fl) / static_cast<std::size_t>(step) + 1;
    const std::size_t bins = onesided ? fl / 2 + 1 : fl;
    auto x = args[0].to_vector<double>();
    std::vector<double> y(batch * frames * bins * 2);
    std::vector<cplx> seq(fl), res(bins);
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t f = 0; f < frames; ++f) {
            for (std::size_t k = 0; k < fl; ++k) {
                std::size_t base = (b * len + f * static_cast<std::size_t>(step) + k) * chans;
                double w = window.empty() ? 1.0 : window[k];
                seq[k] = cplx(x[base], chans == 2 ? x[base + 1] : 0.0) * w;
            }
            transform(seq, fl, false, res);
            for (std::size_t m = 0; m < bins; ++m) {
                std::size_t base = ((b * frames + f) * bins + m) * 2;
                y[base] = res[m].real();
                y[base + 1] = res[m].imag();
            }
        }
    return literal(shape(ss.get_type(), {batch, frames, bins, 2}), y).get_argument();
}

// ---- windows ----

shape window_function::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs("window", in, 1);
    if (!is_integer(in[0].get_type())) throw_error(error_code::type, "window: the size must be an integer");
    if (size >= 0) return shape(dtype, {static_cast<std::size_t>(size)});
    return shape::make_dynamic(dtype, {any_size()});
}

argument window_function::compute(const shape&, const std::vector<argument>& args) const {
    auto n = scalar_of(args[0], "window: size");
    if (n < 0) throw_error(error_code::invalid_argument, "window: negative size");
    const double den = static_cast<double>(periodic ? n : n - 1);
    std::vector<double> w(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < w.size(); ++i) {
        double c1 = std::cos(two_pi * static_cast<double>(i) / den);
        switch (kind) {
            case window_kind::hann: w[i] = 0.5 - 0.5 * c1; break;
            case window_kind::hamming: w[i] = 25.0 / 46.0 - 21.0 / 46.0 * c1; break;
            case window_kind::blackman:
                w[i] = 0.42 - 0.5 * c1 + 0.08 * std::cos(2.0 * two_pi * static_cast<double>(i) / den);
                break;
        }
    }
    return literal(shape(dtype, {w.size()}), w).get_argument();
}

// ---- MelWeightMatrix ----

shape mel_weight_matrix::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs("mel_weight_matrix", in, 5);
    for (std::size_t i = 0; i < 3; ++i)
        if (!is_integer(in[i].get_type()))
            throw_error(error_code::type, "mel_weight_matrix: input " + std::to_string(i) + " must be an integer");
    auto rows = dft_length > 0 ? fixed(static_cast<std::size_t>(dft_length) / 2 + 1) : any_size();
    auto cols = num_mel_bins > 0 ? fixed(static_cast<std::size_t>(num_mel_bins)) : any_size();
    return shape::make_dynamic(dtype, {rows, cols});
}

argument mel_weight_matrix::compute(const shape&, const std::vector<argument>& args) const {
    const auto bins = scalar_of(args[0], "mel_weight_matrix: num_mel_bins");
    const auto dft_len = scalar_of(args[1], "mel_weight_matrix: dft_length");
    const auto rate = scalar_of(args[2], "mel_weight_matrix: sample_rate");
    if (bins <= 0 || dft_len <= 0 || rate <= 0)
        throw_error(error_code::invalid_argument, "mel_weight_matrix: sizes and the sample rate must be positive");
    // The edges are float: the mel scale is evaluated in float, the bin points in double.
    const float lo = static_cast<float>(args[3].get_double(0));
    const float hi = static_cast<float>(args[4].get_double(0));
    const float lo_mel = 2595.0f * std::log10(1.0f + lo / 700.0f);
    const float hi_mel = 2595.0f * std::log10(1.0f + hi / 700.0f);
    const float step = (hi_mel - lo_mel) / static_cast<float>(bins + 2);
    const auto rows = static_cast<std::size_t>(dft_len / 2 + 1);
    const auto cols = static_cast<std::size_t>(bins);
    std::vector<std::int64_t> points(cols + 2);
    for (std::size_t i = 0; i < points.size(); ++i) {
        double mel = static_cast<double>(i) * static_cast<double>(step) + static_cast<double>(lo_mel);
        double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
        points[i] = static_cast<std::int64_t>(std::floor(static_cast<double>(dft_len + 1) * hz / static_cast<double>(rate)));
    }
    std::vector<double> w(rows * cols, 0.0);
    auto set = [&](std::int64_t r, std::size_t c, double v) {
        if (r >= 0 && static_cast<std::size_t>(r) < rows) w[static_cast<std::size_t>(r) * cols + c] = v;
    };
    for (std::size_t i = 0; i < cols; ++i) {
        auto left = points[i], center = points[i + 1], right = points[i + 2];
        if (center == left) set(center, i, 1.0);
        else
            for (auto j = left; j <= center; ++j) set(j, i, double(j - left) / double(center - left));
        if (right > center)
            for (auto j = center; j < right; ++j) set(j, i, double(right - j) / double(right - center));
    }
    return literal(shape(dtype, {rows, cols}), w).get_argument();
}

KILN_REGISTER_OP(dft)
KILN_REGISTER_OP(stft)
KILN_REGISTER_OP(window_function)
KILN_REGISTER_OP(mel_weight_matrix)

}  // namespace kiln::op
