#include "targets/cpu/lowering_util.hpp"

#include "targets/cpu/kernels/layout_view/layout_view.hpp"
#include "targets/cpu/kernels/nchw_to_pixel_channels/nchw_to_pixel_channels.hpp"
#include "targets/cpu/kernels/onednn/op_misc.hpp"

#include "ops/tensor_views.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>

namespace kiln::cpu {

namespace {

// The lowered constants (packed and reordered weights) of the programs alive in this
// process, by content, held weakly. A program with dynamic inputs is compiled once per
// set of input shapes, and every compile packs the same weights again (bert_small: 13
// MB a specialization); a constant equal to one still alive takes that one's memory,
// so the specializations hold one copy and the new one is freed when the lowering
// ends. The table keeps nothing alive: a constant goes with the last program using it.
class shared_constants {
public:
    literal share(literal l) {
        const auto& s = l.get_shape();
        if (!s.is_tensor() || s.dynamic() || s.get_type() == type::string || !s.standard() || l.data() == nullptr ||
            l.get_argument().location() != memory_location::host || s.bytes() < min_bytes)
            return l;
        const std::size_t key = key_of(l);
        std::lock_guard<std::mutex> lock(mutex_);
        auto [first, last] = entries_.equal_range(key);
        for (auto it = first; it != last; ++it) {
            if (it->second.s != s) continue;
            auto buffer = it->second.data.lock();
            if (buffer && std::memcmp(buffer.get(), l.data(), s.bytes()) == 0) return literal(argument(s, buffer));
        }
        entries_.emplace(key, entry{s, l.get_argument().buffer()});
        if (entries_.size() >= 2 * live_ + 64) prune();
        return l;
    }

private:
    static constexpr std::size_t min_bytes = 4096;  // smaller ones are not worth an entry
    struct entry {
        shape s;
        std::weak_ptr<char> data;
    };
    // The shape and 64 evenly spread 8-byte samples; equal keys are compared in full.
    static std::size_t key_of(const literal& l) {
        std::size_t h = l.get_shape().hash();
        const std::size_t bytes = l.get_shape().bytes();
        for (std::size_t i = 0; i < 64; ++i) {
            std::uint64_t v = 0;
            std::memcpy(&v, l.data() + (bytes - 8) * i / 63, 8);
            h = h * 1000003u ^ std::hash<std::uint64_t>{}(v);
        }
        return h;
    }
    void prune() {
        for (auto it = entries_.begin(); it != entries_.end();)
            it = it->second.data.expired() ? entries_.erase(it) : std::next(it);
        live_ = entries_.size();
    }
    std::mutex mutex_;
    std::unordered_multimap<std::size_t, entry> entries_;
    std::size_t live_ = 0;
};

shared_constants& constant_table() {
    static auto* table = new shared_constants;  // never destroyed: programs may outlive static destruction
    return *table;
}

}  // namespace

instruction_ref lower_env::constant(instruction_ref pos, literal l) {
    if (auto same = constants.find(l)) return *same;
    auto made = m.insert_literal(pos, constant_table().share(std::move(l)));
    constants.add(made);
    return made;
}

std::vector<std::size_t> strides_like(const shape& ref, const std::vector<std::size_t>& lens) {
    const std::size_t r = lens.size();
    if (ref.dynamic() || ref.ndim() != r || !ref.packed()) return shape::standard_strides(lens);
    std::vector<std::size_t> order(r);
    std::iota(order.begin(), order.end(), 0);
    const auto& rs = ref.strides();
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rs[a] > rs[b]; });
    std::vector<std::size_t> strides(r);
    std::size_t acc = 1;
    for (std::size_t k = r; k-- > 0;) {
        strides[order[k]] = acc;
        acc *= lens[order[k]];
    }
    return strides;
}

shape packed_like(const shape& x) { return shape(x.get_type(), x.lens(), strides_like(x, x.lens())); }

dnnl::memory::desc layout_md(const lower_env& env, instruction_ref x) {
    auto it = env.layout.find(&*x);
    return it == env.layout.end() ? md_of(x->get_shape()) : it->second.to_md();
}

std::vector<md_record> operand_layouts(const lower_env& env, const std::vector<instruction_ref>& operands) {
    std::vector<md_record> out;
    for (auto in : operands) {
        auto it = env.layout.find(&*in);
        out.push_back(it == env.layout.end() ? md_record{} : it->second);
    }
    return out;
}

bool in_dnnl_layout(const lower_env& env, instruction_ref x) { return env.layout.count(&*x) != 0; }

instruction_ref plain(lower_env& env, instruction_ref x) {
    if (!in_dnnl_layout(env, x)) return x;
    if (auto it = env.plain_copy.find(&*x); it != env.plain_copy.end()) return it->second;
    reorder op;
    op.layouts = {env.layout.at(&*x)};
    const auto pos = std::next(x);
    auto buffer = env.m.insert_instruction(pos, builtin::allocate{x->get_shape().as_standard()}, {});
    auto r = env.m.insert_instruction(pos, op, {x, buffer});
    env.plain_copy.emplace(&*x, r);
    return r;
}

instruction_ref to_layout(lower_env& env, instruction_ref pos, instruction_ref x, const dnnl::memory::desc& want) {
    if (layout_md(env, x) == want) {
        // oneDNN calls descriptors equal that differ only in the strides of dims of size 1,
        // but its kernels choose by the exact strides (a 1-channel NCHW image is not `nhwc`
        // to the brgemm convolutions, which then fall back to the reference kernel): a plain
        // value whose strides differ is seen under the wanted description (no copy).
        if (in_dnnl_layout(env, x)) return x;
        const auto have = md_record::from(layout_md(env, x)), wanted = md_record::from(want);
        if (have.strides == wanted.strides && have.inner_blks == wanted.inner_blks) return x;
        if (auto r = lower_layout_view(env, pos, x, want)) return *r;
    }
    if (auto r = lower_nchw_to_pixel_channels(env, pos, x, want)) return *r;
    reorder op;
    if (in_dnnl_layout(env, x)) op.layouts = {env.layout.at(&*x)};
    op.dst_layout = md_record::from(want);
    auto buffer = env.m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {want.get_size()})}, {});
    auto r = env.m.insert_instruction(pos, op, {x, buffer});
    env.layout[&*r] = op.dst_layout;
    return r;
}

instruction_ref ensure_layout(lower_env& env, instruction_ref pos, instruction_ref x, const shape& layout) {
    x = plain(env, x);
    const auto& s = x->get_shape();
    if (s == layout) return x;
    // Strides of dims of length 1 never matter.
    bool same = s.lens() == layout.lens() && s.get_type() == layout.get_type();
    for (std::size_t d = 0; same && d < s.ndim(); ++d)
        same = s.lens()[d] == 1 || s.strides()[d] == layout.strides()[d];
    if (same) return x;
    auto buffer = env.m.insert_instruction(pos, builtin::allocate{layout}, {});
    return env.m.insert_instruction(pos, reorder{}, {x, buffer});
}

bool is_cpu_kernel(instruction_ref ins) { return ins->name().rfind("cpu::", 0) == 0; }

bool f32_static(instruction_ref ins) {
    const auto& s = ins->get_shape();
    return s.is_tensor() && !s.dynamic() && s.get_type() == type::float32 && s.elements() > 0;
}

bool f32_tensor(instruction_ref ins) {
    const auto& s = ins->get_shape();
    return s.is_tensor() && s.get_type() == type::float32;
}

bool all_f32_static(instruction_ref ins) {
    if (!f32_static(ins)) return false;
    for (auto in : ins->inputs())
        if (!f32_static(in)) return false;
    return true;
}

std::optional<shape> transposed_write_shape(instruction_ref out, const std::vector<std::size_t>& lens) {
    if (out->outputs().size() != 1) return std::nullopt;
    auto t = out->outputs().front();
    const auto* tr = t->get_operator().any_cast<op::transpose>();
    if (tr == nullptr || t->get_shape().standard() || t->outputs().empty()) return std::nullopt;
    for (auto u : t->outputs())
        if (!u->get_operator().any_cast<op::reshape>() && !u->get_operator().any_cast<op::flatten>())
            return std::nullopt;
    const std::size_t r = lens.size();
    std::vector<std::size_t> perm(r);
    for (std::size_t i = 0; i < r; ++i) perm[i] = tr->perm.empty() ? r - 1 - i : static_cast<std::size_t>(tr->perm[i]);
    std::vector<std::size_t> tl(r);
    for (std::size_t i = 0; i < r; ++i) tl[i] = lens[perm[i]];
    const auto ts = shape::standard_strides(tl);
    std::vector<std::size_t> strides(r);
    for (std::size_t i = 0; i < r; ++i) strides[perm[i]] = ts[i];
    return shape(type::float32, lens, strides);
}

}  // namespace kiln::cpu
