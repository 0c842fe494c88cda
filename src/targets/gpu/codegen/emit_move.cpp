#include "targets/gpu/codegen/emit_move.hpp"

#include "codegen/hash.hpp"
#include "ops/common.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/tensor_gather.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/codegen/emit_text.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace kiln::gpu::codegen {

namespace {

std::string num(std::int64_t x) { return std::to_string(x) + "LL"; }
std::string num(std::size_t x) { return num(static_cast<std::int64_t>(x)); }

// Elements move as unsigned integers of their size.
std::string word(type t) {
    switch (type_size(t)) {
        case 1: return "unsigned char";
        case 2: return "unsigned short";
        case 4: return "unsigned int";
        case 8: return "unsigned long long";
        default: throw_error(error_code::unsupported, "gpu move kernel: no word for " + std::string(type_name(t)));
    }
}

bool movable(const shape& s) {
    return s.is_tensor() && !s.dynamic() && s.get_type() != type::string && type_size(s.get_type()) <= 8 &&
           (type_size(s.get_type()) & (type_size(s.get_type()) - 1)) == 0;
}

// The body's one op is a T (typed: no op names compared).
template <class T>
bool is(const op::fused& body) {
    return !body.nodes.empty() && body.nodes.front().op.any_cast<T>() != nullptr;
}

// One node reading inputs 0..n-1 in order.
bool one_node_over_inputs(const op::fused& body, std::size_t n) {
    if (body.nodes.size() != 1 || body.nodes[0].args.size() != n) return false;
    for (std::size_t i = 0; i < n; ++i)
        if (body.nodes[0].args[i] != op::fused_input_arg(i)) return false;
    return true;
}

// `i_`'s digits over `lens` (row-major) as the named variables; lens of 1 get "0".
std::vector<std::string> split_index(std::ostream& o, const std::vector<std::size_t>& lens) {
    std::vector<std::string> idx(lens.size(), "0");
    std::size_t last = lens.size();  // the outermost dim of more than one element
    for (std::size_t d = 0; d < lens.size(); ++d)
        if (lens[d] != 1) {
            last = d;
            break;
        }
    if (last == lens.size()) return idx;
    o << "    long long r_ = i_;\n";
    for (std::size_t d = lens.size(); d-- > last;) {
        if (lens[d] == 1) continue;
        idx[d] = "d" + std::to_string(d) + "_";
        if (d == last) o << "    const long long " << idx[d] << " = r_;\n";
        else o << "    const long long " << idx[d] << " = r_ % " << num(lens[d]) << "; r_ /= " << num(lens[d]) << ";\n";
    }
    return idx;
}

void add_term(std::string& s, const std::string& idx, std::int64_t stride) {
    if (idx == "0" || stride == 0) return;
    if (!s.empty()) s += " + ";
    s += idx + (stride == 1 ? "" : " * " + num(stride));
}

std::vector<std::int64_t> strides_of(const shape& s) {
    return std::vector<std::int64_t>(s.strides().begin(), s.strides().end());
}

// Drops length-1 dims and merges neighbours whose strides allow it (row-major order kept).
void collapse(std::vector<std::size_t>& lens, std::vector<std::int64_t>& strides) {
    std::vector<std::size_t> l;
    std::vector<std::int64_t> s;
    for (std::size_t d = 0; d < lens.size(); ++d) {
        if (lens[d] == 1) continue;
        if (!l.empty() && s.back() == strides[d] * static_cast<std::int64_t>(lens[d])) {
            l.back() *= lens[d];
            s.back() = strides[d];
        } else {
            l.push_back(lens[d]);
            s.push_back(strides[d]);
        }
    }
    if (l.empty()) {
        l.push_back(1);
        s.push_back(0);
    }
    lens = l;
    strides = s;
}

void head(std::ostream& o, const std::string& name, const std::vector<shape>& inputs, const shape& output) {
    o << "extern \"C\" __global__ void __launch_bounds__(" << block_size << ") " << name << "(const kiln_args a_) {\n";
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const auto t = word(inputs[i].get_type());
        o << "  const " << t << "* __restrict__ in" << i << " = (const " << t << "*)a_.in[" << i << "];\n";
    }
    o << "  " << word(output.get_type()) << "* __restrict__ out = (" << word(output.get_type()) << "*)a_.out;\n";
    o << "  for (long long i_ = (long long)blockIdx.x * blockDim.x + threadIdx.x; i_ < " << num(output.elements())
      << "; i_ += (long long)gridDim.x * blockDim.x) {\n";
}

// reshape/flatten: output element i is the input's i-th element in row-major order.
void emit_copy(std::ostream& o, const shape& in) {
    auto lens = in.lens();
    auto strides = strides_of(in);
    collapse(lens, strides);
    const auto idx = split_index(o, lens);
    std::string off;
    for (std::size_t d = 0; d < lens.size(); ++d) add_term(off, idx[d], strides[d]);
    o << "    out[i_] = in0[" << (off.empty() ? "0" : off) << "];\n";
}

void emit_gather(std::ostream& o, const op::fused& body, const std::vector<shape>& in, const shape& output) {
    const auto& data = in[0];
    const auto& ind = in[1];
    const auto a = op::normalize_axis(body.nodes[0].op.get<op::gather>().axis, data.ndim(), "gather");
    const auto& ol = output.lens();
    const auto idx = split_index(o, ol);
    std::string data_off, ind_off;
    const std::size_t k = ind.ndim();
    for (std::size_t d = 0; d < ol.size(); ++d) {
        if (d < a) add_term(data_off, idx[d], static_cast<std::int64_t>(data.strides()[d]));
        else if (d < a + k) add_term(ind_off, idx[d], static_cast<std::int64_t>(ind.strides()[d - a]));
        else add_term(data_off, idx[d], static_cast<std::int64_t>(data.strides()[d - k + 1]));
    }
    const auto n = static_cast<std::int64_t>(data.lens()[a]);
    const std::string signed_t = type_size(ind.get_type()) == 4 ? "int" : "long long";
    o << "    long long j_ = (long long)(" << signed_t << ")in1[" << (ind_off.empty() ? "0" : ind_off) << "];\n";
    o << "    if (j_ < 0) j_ += " << num(n) << ";\n";
    o << "    if (j_ < 0 || j_ >= " << num(n) << ") { kiln_report_index(j_ < 0 ? j_ - " << num(n) << " : j_, " << num(n)
      << "); j_ = j_ < 0 ? 0 : " << num(n - 1) << "; }\n";
    add_term(data_off, "j_", static_cast<std::int64_t>(data.strides()[a]));
    o << "    out[i_] = in0[" << (data_off.empty() ? "0" : data_off) << "];\n";
}

void emit_concat(std::ostream& o, const op::fused& body, const std::vector<shape>& in, const shape& output) {
    const auto& ol = output.lens();
    const auto a = op::normalize_axis(body.nodes[0].op.get<op::concat>().axis, ol.size(), "concat");
    auto idx = split_index(o, ol);
    if (idx[a] == "0") o << "    const long long c_ = 0;\n";
    else o << "    const long long c_ = " << idx[a] << ";\n";
    std::size_t start = 0;
    bool first = true;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::size_t len = in[i].lens()[a];
        if (len == 0) continue;
        std::string off;
        for (std::size_t d = 0; d < ol.size(); ++d) {
            const auto s = static_cast<std::int64_t>(in[i].strides()[d]);
            if (d == a) add_term(off, start == 0 ? "c_" : "(c_ - " + num(start) + ")", s);
            else add_term(off, idx[d], s);
        }
        const bool last = start + len == ol[a];
        o << "    " << (first ? "" : "else ") << (last ? "" : "if (c_ < " + num(start + len) + ") ") << "out[i_] = in"
          << i << "[" << (off.empty() ? "0" : off) << "];\n";
        first = false;
        start += len;
    }
}

// tile: each output coordinate modulo the input's length.
void emit_tile(std::ostream& o, const shape& in, const shape& output) {
    const auto& ol = output.lens();
    const auto idx = split_index(o, ol);
    std::string off;
    for (std::size_t d = 0; d < ol.size(); ++d) {
        const auto n = in.lens()[d];
        const auto s = static_cast<std::int64_t>(in.strides()[d]);
        add_term(off, n == ol[d] || idx[d] == "0" ? idx[d] : "(" + idx[d] + " % " + num(n) + ")", s);
    }
    o << "    out[i_] = in0[" << (off.empty() ? "0" : off) << "];\n";
}

// pad (pad::compute's rules): per axis the output coordinate minus the begin pad, then
// constant (outside: the value, input 1 or zero bits), edge (clamped), wrap (modulo) or
// reflect (mirrored without repeating the edge). Negative pads crop.
void emit_pad(std::ostream& o, const op::fused& body, const std::vector<shape>& in, const shape& output) {
    const auto& p = body.nodes[0].op.get<op::pad>();
    const auto& il = in[0].lens();
    const auto& ol = output.lens();
    const auto pads = op::expand_pads(p.pads, p.axes, il.size(), "pad");
    const auto idx = split_index(o, ol);
    std::string off;
    bool bounded = false;
    if (p.mode == "constant") o << "    bool in_ = true;\n";
    for (std::size_t d = 0; d < ol.size(); ++d) {
        const auto n = static_cast<std::int64_t>(il[d]);
        const auto begin = pads[d], end = pads[d + il.size()];
        const auto stride = static_cast<std::int64_t>(in[0].strides()[d]);
        if (begin == 0 && end <= 0) {  // never outside the input on this axis
            add_term(off, idx[d], stride);
            continue;
        }
        const std::string v = "s" + std::to_string(d) + "_";
        o << "    long long " << v << " = " << idx[d] << " - " << num(begin) << ";\n";
        if (p.mode == "constant") {
            o << "    in_ = in_ && " << v << " >= 0 && " << v << " < " << num(n) << ";\n";
            bounded = true;
        } else if (p.mode == "edge") {
            o << "    " << v << " = " << v << " < 0 ? 0 : (" << v << " >= " << num(n) << " ? " << num(n - 1) << " : " << v
              << ");\n";
        } else if (p.mode == "wrap") {
            o << "    " << v << " = ((" << v << " % " << num(n) << ") + " << num(n) << ") % " << num(n) << ";\n";
        } else if (n == 1) {
            o << "    " << v << " = 0;\n";
        } else {  // reflect
            const auto m = 2 * (n - 1);
            o << "    " << v << " = ((" << v << " % " << num(m) << ") + " << num(m) << ") % " << num(m) << ";\n";
            o << "    if (" << v << " >= " << num(n) << ") " << v << " = " << num(m) << " - " << v << ";\n";
        }
        add_term(off, v, stride);
    }
    const std::string fill = in.size() > 1 ? "in1[0]" : "0";
    const std::string read = "in0[" + (off.empty() ? std::string("0") : off) + "]";
    o << "    out[i_] = " << (bounded ? "in_ ? " + read + " : " + fill : read) << ";\n";
}

// Max and average pooling of a float32 input (any strides) with a window: one output
// element per thread, the window's loops unrolled by the compiler (constant bounds), in
// pool_planes' order and arithmetic: max keeps the first NaN and an all-padding window is
// -inf; average sums in double and divides by the elements inside (or, with
// count_include_pad, inside the padded input). Global average pooling comes here only if
// the reduction candidate (selection.cpp: one warp or block per plane instead of one
// thread) declined it; global max pooling always does (the first-NaN rule).
bool is_window_pool(const op::fused& body, const std::vector<shape>& inputs) {
    if (!is<op::pooling>(body) || !one_node_over_inputs(body, 1)) return false;
    const auto& p = body.nodes[0].op.get<op::pooling>();
    const auto& x = inputs[0];
    const auto t = x.get_type();
    if ((t != type::float32 && t != type::float16 && t != type::bfloat16) || x.ndim() < 3) return false;
    return p.mode == op::pooling_mode::max || p.mode == op::pooling_mode::average;
}

void emit_pool(std::ostream& o, const std::string& name, const op::fused& body, const shape& x, const shape& output) {
    const auto& p = body.nodes[0].op.get<op::pooling>();
    const auto g = p.geom(x);
    const std::size_t r = g.in.size();
    const bool max = p.mode == op::pooling_mode::max;
    o << "extern \"C\" __global__ void __launch_bounds__(" << block_size << ") " << name << "(const kiln_args a_) {\n";
    const std::string t = kiln::codegen::c_type(x.get_type());
    o << "  const " << t << "* __restrict__ in0 = (const " << t << "*)a_.in[0];\n";
    o << "  " << t << "* __restrict__ out = (" << t << "*)a_.out;\n";
    o << "  for (long long i_ = (long long)blockIdx.x * blockDim.x + threadIdx.x; i_ < " << num(output.elements())
      << "; i_ += (long long)gridDim.x * blockDim.x) {\n";
    const auto idx = split_index(o, output.lens());
    std::string base;
    add_term(base, idx[0], static_cast<std::int64_t>(x.strides()[0]));
    add_term(base, idx[1], static_cast<std::int64_t>(x.strides()[1]));
    o << "    const " << t << "* xp_ = in0" << (base.empty() ? "" : " + " + base) << ";\n";
    if (max) o << "    float acc_ = -kiln_inff(); bool first_ = true;\n";
    else o << "    double acc_ = 0.0; long long inside_ = 0, padded_ = 0;\n";
    std::string close;
    for (std::size_t d = 0; d < r; ++d) {
        const std::string k = "k" + std::to_string(d) + "_", i = "i" + std::to_string(d) + "_";
        const std::string od = idx[d + 2];
        o << "    for (long long " << k << " = 0; " << k << " < " << num(g.kernel[d]) << "; ++" << k << ") {\n";
        o << "    const long long " << i << " = " << (od == "0" ? std::string("0") : od + " * " + num(g.stride[d])) << " - "
          << num(g.pad_begin[d]) << " + " << k << " * " << num(g.dilation[d]) << ";\n";
        close += "    }\n";
    }
    std::string inside, padded, off;
    for (std::size_t d = 0; d < r; ++d) {
        const std::string i = "i" + std::to_string(d) + "_";
        if (!inside.empty()) inside += " && ";
        inside += i + " >= 0 && " + i + " < " + num(g.in[d]);
        if (!padded.empty()) padded += " && ";
        padded += i + " >= " + num(-g.pad_begin[d]) + " && " + i + " < " + num(g.in[d] + g.pad_end[d]);
        add_term(off, i, static_cast<std::int64_t>(x.strides()[d + 2]));
    }
    if (max) {
        o << "    if (" << inside << ") { const float v_ = " << text::load(x.get_type(), "xp_[" + (off.empty() ? "0" : off) + "]")
          << "; if (first_ || v_ > acc_) { acc_ = v_; first_ = false; } }\n";
    } else {
        o << "    if (" << padded << ") ++padded_;\n";
        o << "    if (" << inside << ") { ++inside_; acc_ += (double)" << text::load(x.get_type(), "xp_[" + (off.empty() ? "0" : off) + "]") << "; }\n";
    }
    o << close;
    if (max) {
        o << "    out[i_] = " << text::store(x.get_type(), "acc_") << ";\n";  // a value of the input: exact
    } else {
        const std::string n = p.count_include_pad ? "padded_" : "inside_";
        // The mean rounded once from double, as the reference's (16 bits: kiln_d2h/kiln_d2b).
        const std::string mean = "(" + n + " > 0 ? acc_ / (double)" + n + " : 0.0)";
        if (x.get_type() == type::float16) o << "    out[i_] = kiln_d2h" << mean << ";\n";
        else if (x.get_type() == type::bfloat16) o << "    out[i_] = kiln_d2b" << mean << ";\n";
        else o << "    out[i_] = " << n << " > 0 ? (float)(acc_ / (double)" << n << ") : 0.0f;\n";
    }
}

}  // namespace

bool is_move(const op::fused& body, const std::vector<shape>& inputs) {
    if (body.nodes.size() != 1) return false;
    if (!std::all_of(inputs.begin(), inputs.end(), [](const shape& s) { return s.is_tensor() && !s.dynamic(); }))
        return false;
    if (is<op::reshape>(body) || is<op::flatten>(body)) return one_node_over_inputs(body, 1) && movable(inputs[0]);
    if (is<op::gather>(body))
        return one_node_over_inputs(body, 2) && movable(inputs[0]) &&
               (inputs[1].get_type() == type::int32 || inputs[1].get_type() == type::int64);
    if (is<op::tile>(body)) return one_node_over_inputs(body, 1) && movable(inputs[0]);
    if (is<op::pooling>(body)) return is_window_pool(body, inputs);
    if (is<op::pad>(body)) {
        const auto& p = body.nodes[0].op.get<op::pad>();
        if (!one_node_over_inputs(body, inputs.size()) || inputs.empty() || inputs.size() > 2) return false;
        if (p.mode != "constant" && p.mode != "edge" && p.mode != "wrap" && p.mode != "reflect") return false;
        // Other modes of an empty axis are refused by pad itself; constant reads no input there.
        return std::all_of(inputs.begin(), inputs.end(), movable);
    }
    if (is<op::concat>(body))
        return !inputs.empty() && inputs.size() < 64 && one_node_over_inputs(body, inputs.size()) &&
               std::all_of(inputs.begin(), inputs.end(), movable);
    return false;
}

std::string emit_move_kernel(const op::fused& body, const std::vector<shape>& inputs, const shape& output,
                             const std::string& name) {
    if (!is_move(body, inputs)) throw_error(error_code::unsupported, "gpu move kernel: not a data-movement body");
    std::ostringstream o;
    if (is<op::pooling>(body)) {
        emit_pool(o, name, body, inputs[0], output);
        o << "  }\n}\n";
        return o.str();
    }
    head(o, name, inputs, output);
    if (is<op::gather>(body)) emit_gather(o, body, inputs, output);
    else if (is<op::concat>(body)) emit_concat(o, body, inputs, output);
    else if (is<op::tile>(body)) emit_tile(o, inputs[0], output);
    else if (is<op::pad>(body)) emit_pad(o, body, inputs, output);
    else emit_copy(o, inputs[0]);
    o << "  }\n}\n";
    return o.str();
}

std::string move_symbol(const op::fused& body, const std::vector<shape>& inputs, const shape& output) {
    return "kiln_gpu_" + kiln::codegen::content_hash(emit_move_kernel(body, inputs, output, "KERNEL")).substr(0, 24);
}

unsigned move_grid(std::size_t elements) {
    const std::size_t blocks = (elements + block_size - 1) / block_size;
    return static_cast<unsigned>(std::clamp<std::size_t>(blocks, 1, 65535u * 8));
}

}  // namespace kiln::gpu::codegen
