// Signal processing: DFT, STFT, the Hann/Hamming/Blackman windows and
// MelWeightMatrix. Transforms are computed directly (O(n^2)) in double: the reference
// target favours clarity; real targets lower to FFT libraries.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

// Input [..., n, ..., 1 or 2] (real or complex), the transform along `axis` (of the
// full rank). Inputs: x, then [dft_length] and [axis] when given at run time.
struct dft {
    std::int64_t axis = 1;
    std::int64_t dft_length = -1;  // -1: the input's length (or a run-time input)
    bool inverse = false;
    bool onesided = false;
    bool length_input = false;
    bool axis_input = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.dft_length, "dft_length");
        f(self.inverse, "inverse");
        f(self.onesided, "onesided");
        f(self.length_input, "length_input");
        f(self.axis_input, "axis_input");
    }
    std::string name() const { return "dft"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs: signal [batch, length, 1 or 2], frame_step, then (flags) window, frame_length.
struct stft {
    bool onesided = true;
    bool has_window = false;
    bool has_frame_length = false;
    std::int64_t frame_step = -1;    // known at parse time, else -1
    std::int64_t frame_length = -1;  // known at parse time (or the window's length), else -1
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.onesided, "onesided");
        f(self.has_window, "has_window");
        f(self.has_frame_length, "has_frame_length");
        f(self.frame_step, "frame_step");
        f(self.frame_length, "frame_length");
    }
    std::string name() const { return "stft"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

enum class window_kind : std::uint8_t { hann, hamming, blackman };

// Input: the size (a scalar). `size` holds it when known at parse time.
struct window_function {
    window_kind kind = window_kind::hann;
    bool periodic = true;
    type dtype = type::float32;
    std::int64_t size = -1;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.kind, "kind");
        f(self.periodic, "periodic");
        f(self.dtype, "dtype");
        f(self.size, "size");
    }
    std::string name() const { return "window"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs: num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz.
struct mel_weight_matrix {
    type dtype = type::float32;
    std::int64_t num_mel_bins = -1;  // known at parse time, else -1
    std::int64_t dft_length = -1;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.dtype, "dtype");
        f(self.num_mel_bins, "num_mel_bins");
        f(self.dft_length, "dft_length");
    }
    std::string name() const { return "mel_weight_matrix"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
