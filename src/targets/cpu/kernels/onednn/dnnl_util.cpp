#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include <kiln/errors.hpp>

#include <omp.h>

#include <algorithm>
#include <numeric>

namespace kiln::cpu {

bool dnnl_type_supported(type t) { return t == type::float32; }

dnnl::memory::data_type to_dnnl_type(type t) {
    switch (t) {
        case type::float32: return dnnl::memory::data_type::f32;
        case type::bfloat16: return dnnl::memory::data_type::bf16;
        case type::float16: return dnnl::memory::data_type::f16;
        case type::int8: return dnnl::memory::data_type::s8;
        case type::uint8: return dnnl::memory::data_type::u8;
        case type::int32: return dnnl::memory::data_type::s32;
        default: break;
    }
    throw_error(error_code::unsupported, "cpu target: element type " + std::string(type_name(t)) +
                                             " has no oneDNN data type");
}

dnnl::memory::dims to_dims(const std::vector<std::size_t>& v) {
    return dnnl::memory::dims(v.begin(), v.end());
}
dnnl::memory::dims to_dims(const std::vector<std::int64_t>& v) { return dnnl::memory::dims(v.begin(), v.end()); }

dnnl::memory::desc md_of(const shape& s) {
    return dnnl::memory::desc(to_dims(s.lens()), to_dnnl_type(s.get_type()), to_dims(s.strides()));
}

dnnl::memory::desc any_md(const shape& s) {
    return dnnl::memory::desc(to_dims(s.lens()), to_dnnl_type(s.get_type()), dnnl::memory::format_tag::any);
}

dnnl::memory::desc retyped(const dnnl::memory::desc& md, dnnl::memory::data_type t) {
    if (md.data.format_kind == dnnl_format_kind_any) return dnnl::memory::desc(md.dims(), t, dnnl::memory::format_tag::any);
    if (!md_record::representable(md) || md.data.extra.flags != 0)
        throw_error(error_code::unsupported, "cpu target: only a plain or blocked oneDNN layout can be retyped");
    // The same blocking (md_record's checks are for stored layouts, which are float only).
    auto d = md.data;
    d.data_type = static_cast<dnnl_data_type_t>(t);
    return dnnl::memory::desc(d);
}

dnnl::memory::desc md_with_rank(const shape& s, std::size_t rank) {
    auto lens = s.lens();
    auto strides = s.strides();
    if (rank < lens.size())
        throw_error(error_code::runtime, "cpu target: cannot view " + s.to_string() + " with rank " +
                                             std::to_string(rank));
    const std::size_t outer = std::max<std::size_t>(s.element_space(), 1);
    lens.insert(lens.begin(), rank - s.ndim(), 1);
    strides.insert(strides.begin(), rank - s.ndim(), outer);
    return dnnl::memory::desc(to_dims(lens), to_dnnl_type(s.get_type()), to_dims(strides));
}

std::vector<std::size_t> channels_last_strides(const std::vector<std::size_t>& lens) {
    const std::size_t r = lens.size();
    if (r < 3) return shape::standard_strides(lens);
    std::vector<std::size_t> strides(r);
    // C innermost, then the spatial dims from the last outwards, N outermost.
    std::size_t acc = lens[1];
    strides[1] = 1;
    for (std::size_t d = r - 1; d >= 2; --d) {
        strides[d] = acc;
        acc *= lens[d];
    }
    strides[0] = acc;
    return strides;
}

bool is_channels_last(const shape& s) {
    if (!s.is_tensor() || s.dynamic() || s.ndim() < 3) return false;
    // Compare only where it matters: dims of length 1 may carry any stride.
    auto want = channels_last_strides(s.lens());
    for (std::size_t d = 0; d < s.ndim(); ++d)
        if (s.lens()[d] != 1 && s.strides()[d] != want[d]) return false;
    return true;
}

bool md_record::representable(const dnnl::memory::desc& md) {
    return md.data.format_kind == dnnl_blocked && md.data.ndims > 0;
}

md_record md_record::from(const dnnl::memory::desc& md) {
    if (!representable(md))
        throw_error(error_code::unsupported, "cpu target: a oneDNN memory layout that is not blocked cannot be stored");
    const auto& d = md.data;
    md_record r;
    r.data_type = d.data_type;
    const auto& b = d.format_desc.blocking;
    for (int i = 0; i < d.ndims; ++i) {
        r.dims.push_back(d.dims[i]);
        r.padded_dims.push_back(d.padded_dims[i]);
        r.padded_offsets.push_back(d.padded_offsets[i]);
        r.strides.push_back(b.strides[i]);
    }
    for (int i = 0; i < b.inner_nblks; ++i) {
        r.inner_blks.push_back(b.inner_blks[i]);
        r.inner_idxs.push_back(b.inner_idxs[i]);
    }
    r.offset0 = d.offset0;
    r.extra_flags = d.extra.flags;
    return r;
}

dnnl::memory::desc md_record::to_md() const {
    const std::size_t n = dims.size();
    auto bad = [](const std::string& why) {
        throw_error(error_code::parse, "cpu target: stored weights layout is invalid: " + why);
    };
    if (n == 0 || n > DNNL_MAX_NDIMS) bad("rank " + std::to_string(n));
    if (padded_dims.size() != n || padded_offsets.size() != n || strides.size() != n) bad("inconsistent ranks");
    if (inner_blks.size() != inner_idxs.size() || inner_blks.size() > DNNL_MAX_NDIMS) bad("inner blocks");
    if (extra_flags != 0) bad("extra flags are not supported");
    dnnl_memory_desc_t d{};
    d.ndims = static_cast<int>(n);
    d.data_type = static_cast<dnnl_data_type_t>(data_type);
    d.format_kind = dnnl_blocked;
    d.offset0 = offset0;
    auto& b = d.format_desc.blocking;
    for (std::size_t i = 0; i < n; ++i) {
        if (dims[i] <= 0 || padded_dims[i] < dims[i] || padded_offsets[i] != 0 || strides[i] < 0)
            bad("dimension " + std::to_string(i));
        d.dims[i] = dims[i];
        d.padded_dims[i] = padded_dims[i];
        d.padded_offsets[i] = padded_offsets[i];
        b.strides[i] = strides[i];
    }
    b.inner_nblks = static_cast<int>(inner_blks.size());
    for (std::size_t i = 0; i < inner_blks.size(); ++i) {
        if (inner_blks[i] <= 0 || inner_idxs[i] < 0 || inner_idxs[i] >= static_cast<std::int64_t>(n))
            bad("inner block " + std::to_string(i));
        b.inner_blks[i] = inner_blks[i];
        b.inner_idxs[i] = inner_idxs[i];
    }
    dnnl::memory::desc md(d);
    if (data_type != dnnl_f32 && data_type != dnnl_bf16) bad("data type " + std::to_string(data_type));
    return md;
}

omp_threads_scope::omp_threads_scope(std::size_t threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(static_cast<int>(std::max<std::size_t>(threads, 1)));
}
omp_threads_scope::~omp_threads_scope() { omp_set_num_threads(saved_); }

std::string impl_name(const dnnl::primitive_desc_base& pd) {
    const char* s = pd.impl_info_str();
    return s ? std::string(s) : std::string();
}

namespace {
const char* type_abbrev(dnnl::memory::data_type t) {
    using dt = dnnl::memory::data_type;
    switch (t) {
        case dt::f32: return "f32";
        case dt::f16: return "f16";
        case dt::bf16: return "bf16";
        case dt::s32: return "s32";
        case dt::s8: return "s8";
        case dt::u8: return "u8";
        default: return "";
    }
}
}  // namespace

std::string kernel_description(const dnnl::primitive_desc_base& pd) {
    std::string s = impl_name(pd);
    const char* src = type_abbrev(pd.src_desc().data_type());
    const char* wei = type_abbrev(pd.weights_desc().data_type());
    const char* dst = type_abbrev(pd.dst_desc().data_type());
    if (*src && *dst) {
        s += std::string(" ") + src;
        if (*wei) s += std::string(" x ") + wei;
        s += std::string(" -> ") + dst;
    }
    return s;
}

bool same_layout(const md_record& a, const md_record& b) {
    return !a.empty() && !b.empty() && a.to_md() == b.to_md();
}

std::int64_t channel_block(const md_record& r) {
    if (r.dims.size() != 4 || r.inner_blks.size() != 1 || r.inner_idxs.size() != 1 || r.inner_idxs[0] != 1 ||
        r.offset0 != 0 || r.padded_dims.size() != 4 || r.strides.size() != 4)
        return 0;
    const std::int64_t b = r.inner_blks[0];
    if (b != 8 && b != 16) return 0;
    const auto& p = r.padded_dims;
    if (p[0] != r.dims[0] || p[2] != r.dims[2] || p[3] != r.dims[3] || p[1] % b != 0) return 0;
    const std::int64_t hw = p[2] * p[3] * b;
    if (r.strides[3] != b || r.strides[2] != p[3] * b || r.strides[1] != hw || r.strides[0] != hw * (p[1] / b))
        return 0;
    return b;
}

std::int64_t pixel_channels(const md_record& r) {
    if (const std::int64_t b = channel_block(r)) return b;
    if (r.dims.size() != 4 || !r.inner_blks.empty() || r.offset0 != 0 || r.padded_dims != r.dims ||
        r.strides.size() != 4)
        return 0;
    const auto& d = r.dims;
    if (r.strides[1] != 1 || r.strides[3] != d[1] || r.strides[2] != d[3] * d[1] || r.strides[0] != d[2] * d[3] * d[1])
        return 0;
    return d[1];
}

md_record pixel_channels_layout_like(const md_record& x, const std::vector<std::size_t>& dims) {
    return pixel_channels_layout(channel_block(x), dims);
}

md_record pixel_channels_layout(std::int64_t b, const std::vector<std::size_t>& dims) {
    const auto tag = b == 16  ? dnnl::memory::format_tag::aBcd16b
                     : b == 8 ? dnnl::memory::format_tag::aBcd8b
                              : dnnl::memory::format_tag::acdb;
    return md_record::from(dnnl::memory::desc(to_dims(dims), dnnl::memory::data_type::f32, tag));
}

void expect_pixel_channels_input(const std::string& op, const shape& x, const md_record& layout) {
    if (x.ndim() != 4 || x.get_type() != type::float32 || layout.dims.empty() ||
        to_dims(x.lens()) != layout.to_md().dims())
        throw_error(error_code::shape, op + ": x " + x.to_string() + " is not a float32 NCHW tensor in its recorded layout");
    const std::int64_t g = pixel_channels(layout);
    if (g <= 0 || layout.padded_dims.at(1) % g != 0)
        throw_error(error_code::shape, op + ": x's layout does not store its channels per pixel");
}

bool channel_groups_fit(const md_record& x, const md_record& y) {
    const std::int64_t bx = pixel_channels(x), by = pixel_channels(y);
    return bx > 0 && by > 0 && bx % 8 == 0 && by % 8 == 0;
}

}  // namespace kiln::cpu
