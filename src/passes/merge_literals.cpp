#include "passes/merge_literals.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

namespace {

// A cheap key: the shape and up to 64 evenly spread 8-byte samples of the data (equal
// keys are then compared byte for byte).
std::size_t key_of(const literal& l) {
    std::size_t h = std::hash<std::string>{}(l.get_shape().to_string());
    const std::size_t bytes = l.get_shape().bytes();
    const char* d = l.data();
    if (d == nullptr || bytes == 0) return h;
    const std::size_t samples = std::min<std::size_t>(64, bytes / 8);
    for (std::size_t i = 0; i < samples; ++i) {
        std::uint64_t v = 0;
        std::memcpy(&v, d + (bytes - 8) * i / std::max<std::size_t>(1, samples - 1), 8);
        h = h * 1000003u ^ std::hash<std::uint64_t>{}(v);
    }
    return h;
}

bool same(const literal& a, const literal& b) {
    if (a.get_shape() != b.get_shape()) return false;
    const std::size_t bytes = a.get_shape().bytes();
    if (a.data() == b.data()) return true;
    if (a.data() == nullptr || b.data() == nullptr) return false;
    return std::memcmp(a.data(), b.data(), bytes) == 0;
}

}  // namespace

std::optional<instruction_ref> literal_index::find(const literal& l) const {
    auto b = buckets_.find(key_of(l));
    if (b == buckets_.end()) return std::nullopt;
    for (auto prev : b->second)
        if (same(prev->get_literal(), l)) return prev;
    return std::nullopt;
}

void literal_index::add(instruction_ref lit) { buckets_[key_of(lit->get_literal())].push_back(lit); }

void merge_literals::apply(module& m) const {
    literal_index seen;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!ins->is_literal() || ins->outputs().empty()) continue;
        if (auto prev = seen.find(ins->get_literal())) m.replace_instruction(ins, *prev);
        else seen.add(ins);
    }
}

}  // namespace kiln
