// The Mersenne Twister MT19937 with NumPy's legacy seeding and uniform doubles, so that
// ops with a `seed` attribute (Dropout in training mode) draw the same numbers as the
// ONNX reference, which seeds numpy.random with it. std::mt19937 has the same recurrence
// and seeding, but std::uniform_real_distribution makes doubles differently.
#pragma once
#include <array>
#include <cstdint>

namespace kiln::op {

class mt19937_numpy {
public:
    explicit mt19937_numpy(std::uint32_t seed) {
        state_[0] = seed;
        for (std::uint32_t i = 1; i < n; ++i)
            state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + i;
        pos_ = n;
    }

    std::uint32_t next_u32() {
        if (pos_ >= n) twist();
        std::uint32_t y = state_[pos_++];
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c5680u;
        y ^= (y << 15) & 0xefc60000u;
        y ^= y >> 18;
        return y;
    }

    // A double in [0, 1) from 53 random bits (27 + 26), as numpy.random.random_sample.
    double next_double() {
        const std::uint32_t a = next_u32() >> 5, b = next_u32() >> 6;
        return (a * 67108864.0 + b) / 9007199254740992.0;
    }

private:
    static constexpr std::uint32_t n = 624, m = 397;
    void twist() {
        for (std::uint32_t i = 0; i < n; ++i) {
            const std::uint32_t y = (state_[i] & 0x80000000u) | (state_[(i + 1) % n] & 0x7fffffffu);
            state_[i] = state_[(i + m) % n] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        pos_ = 0;
    }
    std::array<std::uint32_t, n> state_{};
    std::uint32_t pos_ = n;
};

}  // namespace kiln::op
