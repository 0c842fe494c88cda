// quantize_int8 (include/kiln/quantization.hpp): post-training static quantization with
// calibration, in three steps.
//
// 1. Choose: every float32 convolution / matmul / gemm the caller named whose weights are a
//    float32 literal (a matmul may also multiply two activations, as attention does) and
//    whose form the fuse_qdq pass takes (gemm: alpha 1, A not transposed, a literal C).
// 2. Calibrate: a copy of the program returns, besides its outputs, every activation read by
//    a chosen op; it is compiled for the caller's target and run over every calibration set.
//    minmax keeps each tensor's smallest and largest value; percentile and entropy run the
//    sets a second time to fill an 8192-bin histogram of |x| over [0, max |x|] (and, for a
//    tensor with both signs, one of x per side) and clip there.
// 3. Rewrite into the QDQ form quantized ONNX models import to: each chosen activation gets
//    one QuantizeLinear -> DequantizeLinear pair (shared by all its chosen readers), the
//    weights become an int8 literal read through a per-output-channel DequantizeLinear.
//    Residual adds whose result is quantized anyway (int8_options::quantize_adds) get Q/DQ
//    inputs too; nothing else changes: softmax, the norms stay float32. At compile time
//    fuse_qdq (src/passes) turns each DQ -> conv/dot [-> relu/clip -> Q] group into
//    quant_convolution / quant_dot, with the next layer's Q folded in as a requantize where
//    the product (through at most one relu/clip) has that Q as its only reader.
//
// Activations are uint8 with a zero point (asymmetric): VNNI's dot product multiplies u8 by
// s8, and oneDNN runs an s8 activation by adding 128 and subtracting a precomputed
// compensation per output; a ReLU output uses the whole 0..255 range. The second operand
// of a product of two activations (attention's K^T and V) takes the weights' place, so it
// is int8 symmetric. Weights are int8 symmetric in [-127, 127] (no zero point, no -128, so
// that u8 x s8 pairs cannot saturate VNNI's 16-bit intermediate sums).
//
// quantize_fp8 is the same three steps with float8 e4m3fn for activations and weights alike:
// one scale per tensor, amax / 448, no zero point (the form cuBLASLt's fp8 matmuls take), the
// QuantizeLinear saturating. fuse_qdq leaves these pairs (it takes 8-bit integers only); the
// cpu target rounds through e4m3fn in float32 (kernels/fp8). percentile and entropy clip the
// range as for int8 (entropy's quantized histogram still has int8's 128 / 256 levels).
#include <kiln/quantization.hpp>

#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/quantize.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/fuse_qdq.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

namespace kiln {

namespace {

using rewrite::is;

// Bins of the |x| histogram percentile and entropy calibration read. Entropy measures each
// candidate range at entropy_bins_per_level bins per quantization level, so the narrowest range
// it can pick (a range of levels * entropy_bins_per_level bins) is amax / 8 for 256 levels.
constexpr std::size_t histogram_bins = 8192;
constexpr std::size_t entropy_bins_per_level = 4;
// The candidate thresholds of entropy calibration: every (histogram_bins / entropy_candidates)-th
// bin edge, TensorRT's 2048-bin grid.
constexpr std::size_t entropy_candidates = 2048;

std::set<std::string> int8_op_names(const std::vector<std::string>& ops) {
    std::set<std::string> names;
    for (const auto& n : ops) {
        if (n == "dot") names.insert({"matmul", "gemm"});
        else if (n == "convolution" || n == "matmul" || n == "gemm") names.insert(n);
        else if (n == "all") names.insert({"convolution", "matmul", "gemm"});
        else
            throw_error(error_code::invalid_argument, "quantize_int8: op '" + n +
                                                          "' has no int8 form here (convolution, matmul, gemm, "
                                                          "\"dot\" or \"all\")");
    }
    return names;
}

bool is_f32(instruction_ref x) { return x->get_shape().is_tensor() && x->get_shape().get_type() == type::float32; }
bool f32_literal(instruction_ref x) { return x->is_literal() && is_f32(x) && !x->get_shape().dynamic(); }

// How one input of a chosen op is quantized.
enum class input_kind { activation_u8, activation_s8, weights };

struct weight_plan {
    std::size_t input = 1;
    std::optional<std::size_t> axis;  // per channel along it, else per tensor
};

// A chosen op: which inputs are activations (by their kind) and where its weights are.
struct op_plan {
    instruction_ref ins;
    std::vector<std::pair<std::size_t, input_kind>> activations;  // input index, kind
    std::optional<weight_plan> weights;
    std::string name;  // in the text form before the rewrite
};

// Why `ins` stays float32, or "" with `plan` filled.
std::string plan_op(instruction_ref ins, op_plan& plan) {
    plan.ins = ins;
    const auto& in = ins->inputs();
    if (!is_f32(ins)) return "not float32";
    if (in.size() < 2 || !is_f32(in[0]) || !is_f32(in[1])) return "inputs not float32";
    if (in[0]->is_literal()) return "constant first operand";
    if (is<op::convolution>(ins)) {
        if (!f32_literal(in[1]) || in[1]->get_shape().ndim() < 3) return "weights not a constant";
        if (in.size() > 2 && !f32_literal(in[2])) return "bias not a constant";
        plan.activations.push_back({0, input_kind::activation_u8});
        plan.weights = weight_plan{1, 0};
        return "";
    }
    if (is<op::matmul>(ins)) {
        if (in[0]->get_shape().ndim() < 2 || in[1]->get_shape().ndim() < 2) return "a matrix-vector product";
        plan.activations.push_back({0, input_kind::activation_u8});
        if (f32_literal(in[1])) {
            const auto nd = in[1]->get_shape().ndim();
            plan.weights = weight_plan{1, nd == 2 ? std::optional<std::size_t>(nd - 1) : std::nullopt};
        } else {
            plan.activations.push_back({1, input_kind::activation_s8});
        }
        return "";
    }
    if (is<op::gemm>(ins)) {
        const auto& g = ins->get_operator().get<op::gemm>();
        if (g.alpha != 1.0f || g.trans_a || (in.size() > 2 && g.beta != 1.0f)) return "gemm with alpha/beta != 1 or trans_a";
        if (!f32_literal(in[1]) || in[1]->get_shape().ndim() != 2) return "weights not a constant";
        if (in.size() > 2) {
            const auto n = in[1]->get_shape().lens()[g.trans_b ? 0 : 1];
            if (!f32_literal(in[2]) || in[2]->get_shape().elements() != n) return "C not a constant per-column bias";
        }
        plan.activations.push_back({0, input_kind::activation_u8});
        plan.weights = weight_plan{1, std::size_t(g.trans_b ? 0 : 1)};
        return "";
    }
    return "not a convolution or dot";
}

// What the calibration runs saw of one activation.
struct tensor_stats {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -std::numeric_limits<double>::infinity();
    std::vector<double> hist;  // of |x| over [0, amax], histogram_bins bins (second pass)
    // Of x over [-amax, amax], 2 * histogram_bins bins, when x was seen below 0 (second pass):
    // an asymmetric (u8) tensor's entropy threshold comes from it.
    std::vector<double> signed_hist;
    double amax() const { return std::max(std::fabs(lo), std::fabs(hi)); }
};

const float* floats_of(const argument& a, argument& keep) {
    keep = a.contiguous();
    return keep.data_as<float>();
}

void update_range(tensor_stats& s, const argument& a) {
    argument keep;
    const float* x = floats_of(a, keep);
    const std::size_t n = a.get_shape().elements();
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) continue;
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (lo <= hi) {
        s.lo = std::min(s.lo, double(lo));
        s.hi = std::max(s.hi, double(hi));
    }
}

void update_histogram(tensor_stats& s, const argument& a) {
    if (s.hist.empty()) s.hist.assign(histogram_bins, 0.0);
    const double amax = s.amax();
    if (!(amax > 0) || !std::isfinite(amax)) return;
    argument keep;
    const float* x = floats_of(a, keep);
    const std::size_t n = a.get_shape().elements();
    const double per_bin = static_cast<double>(histogram_bins) / amax;
    const bool with_sign = s.lo < 0;
    if (with_sign && s.signed_hist.empty()) s.signed_hist.assign(2 * histogram_bins, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) continue;
        const double ax = std::fabs(double(x[i]));
        const auto b = std::min(static_cast<std::size_t>(ax * per_bin), histogram_bins - 1);
        s.hist[b] += 1;
        if (with_sign) s.signed_hist[x[i] < 0 ? histogram_bins - 1 - b : histogram_bins + b] += 1;
    }
}

// The |x| below which `percentile` % of the values lie (upper edge of that bin).
double percentile_threshold(const tensor_stats& s, double percentile) {
    double total = 0;
    for (double h : s.hist) total += h;
    if (total <= 0) return s.amax();
    const double want = total * percentile / 100.0;
    double seen = 0;
    for (std::size_t i = 0; i < s.hist.size(); ++i) {
        seen += s.hist[i];
        if (seen >= want) return s.amax() * static_cast<double>(i + 1) / static_cast<double>(histogram_bins);
    }
    return s.amax();
}

// KL(p || q) of the range [0, T], T `width` bins of `hist` (`cum` its prefix sums), measured
// at `levels` * entropy_bins_per_level sub-bins of equal width whatever T is (a bin's count
// split linearly where a sub-bin edge cuts it): p is the clipped distribution (the values
// beyond T added to its last sub-bin), q that distribution quantized to `levels` steps (each
// step's mass spread over its non-empty sub-bins). Empty sub-bins of p and q get a count of
// 1e-4 (MXNet's and ONNX Runtime's smoothing is of counts too), so KL stays finite.
//
// Measuring every candidate at the same resolution relative to its quantization step is the
// point. On the raw histogram (TensorRT's form) the narrowest candidate, one histogram bin per
// level, has q == p inside the range and pays only for what it clips, while a wider range pays
// mass * ln(bins per level) for each point mass (a constant a conv makes on a flat background,
// a spike one bin wide) that its steps spread out, a cost of the histogram's resolution, not of
// the quantization. fashion_resnet's stem ReLU (53% zeros, sixteen such spikes of ~2% each)
// was clipped from 4.58 to 0.58 that way, 3% of its values, which cost 2.2 points of accuracy.
double kl_of_range(const std::vector<double>& hist, const std::vector<double>& cum, std::size_t width,
                   std::size_t levels, std::vector<double>& p, std::vector<double>& q) {
    const std::size_t n = hist.size();
    const std::size_t m = levels * entropy_bins_per_level;
    auto count_below = [&](double x) {  // values in the first x bins (x fractional)
        const auto k = std::min(static_cast<std::size_t>(x), n);
        return k == n ? cum[n] : cum[k] + (x - static_cast<double>(k)) * hist[k];
    };
    p.assign(m, 0.0);
    const double sub = static_cast<double>(width) / static_cast<double>(m);
    double below = 0;
    for (std::size_t j = 0; j < m; ++j) {
        const double next = j + 1 == m ? cum[width] : count_below(sub * static_cast<double>(j + 1));
        p[j] = std::max(0.0, next - below);
        below = next;
    }
    q.assign(m, 0.0);
    for (std::size_t l = 0; l < levels; ++l) {
        double sum = 0;
        std::size_t nonzero = 0;
        for (std::size_t k = l * entropy_bins_per_level; k < (l + 1) * entropy_bins_per_level; ++k) {
            sum += p[k];
            nonzero += p[k] > 0;
        }
        if (nonzero == 0) continue;
        for (std::size_t k = l * entropy_bins_per_level; k < (l + 1) * entropy_bins_per_level; ++k)
            if (p[k] > 0) q[k] = sum / static_cast<double>(nonzero);
    }
    p.back() += cum[n] - cum[width];
    constexpr double eps = 1e-4;
    double ps = 0, qs = 0;
    for (std::size_t k = 0; k < m; ++k) {
        if (p[k] <= 0) p[k] = eps;
        if (q[k] <= 0) q[k] = eps;
        ps += p[k];
        qs += q[k];
    }
    double kl = 0;
    for (std::size_t k = 0; k < m; ++k) kl += p[k] / ps * std::log((p[k] / ps) / (q[k] / qs));
    return kl;
}

// TensorRT's entropy calibration: the threshold T (a bin edge of the |x| histogram, on
// TensorRT's 2048-bin grid) at which the distribution clipped to [0, T] and that distribution
// quantized to `levels` steps differ least in KL divergence, measured as kl_of_range says.
double entropy_threshold(const tensor_stats& s, std::size_t levels) {
    // The first bin holds a ReLU output's zeros (half of it, often): a spike that makes every
    // coarse quantization of the rest look cheap. As NVIDIA's pytorch-quantization does, it
    // counts as much as its neighbour.
    std::vector<double> hist = s.hist;
    if (hist.size() > 1) hist[0] = hist[1];
    const std::size_t n = hist.size();
    // The same for every other point mass standing on a continuous part: a bin holding more
    // than its two (non-empty) neighbours together, such as the constant a convolution makes of
    // a flat image background. Quantization moves a point mass by at most half a step and
    // keeps it one value, but q spreads it over its step, and the KL of that spreading
    // (mass * ln(bins it is spread over)) swamps what clipping costs; how much depends on
    // where the steps' edges fall, so the minimum jumped between unrelated ranges. An isolated
    // count in an empty neighbourhood (a tail's sample, an outlier) stays as it is.
    {
        const std::vector<double> seen = hist;
        for (std::size_t k = 1; k + 1 < n; ++k)
            if (seen[k - 1] > 0 && seen[k + 1] > 0 && seen[k] > seen[k - 1] + seen[k + 1])
                hist[k] = std::max(seen[k - 1], seen[k + 1]);
    }
    std::vector<double> cum(n + 1, 0.0);
    for (std::size_t k = 0; k < n; ++k) cum[k + 1] = cum[k] + hist[k];
    const std::size_t narrowest = levels * entropy_bins_per_level;
    if (cum[n] <= 0 || narrowest > n) return s.amax();
    const std::size_t step = std::max<std::size_t>(1, n / entropy_candidates);
    double best_kl = std::numeric_limits<double>::infinity();
    std::size_t best = n;
    std::vector<double> p, q;
    for (std::size_t i = n; i >= narrowest; i -= std::min(step, i)) {  // widest first: ties keep it
        const double kl = kl_of_range(hist, cum, i, levels, p, q);
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
        if (i < narrowest + step) break;
    }
    return s.amax() * static_cast<double>(best) / static_cast<double>(n);
}

// A u8 tensor that takes both signs is quantized over [lo, hi] (asymmetric), so each side is
// clipped by its own distribution: TensorRT's search above over the side's |x| histogram,
// with the side's share of the 256 levels. Folding the signs into one |x| histogram puts
// one side's values among the other's: an image input normalised to [-0.81, 2.02], whose
// background is a spike at -0.81, had its positive side clipped at 0.81 (27% of its values).
// (A symmetric window over the signed histogram, as MXNet's and ONNX Runtime's calibrators
// use, fixed that input too but clipped bert_small's residual sums harder: twice the error.)
// Returns {-lo, hi} clipped.
std::pair<double, double> two_sided_entropy_thresholds(const tensor_stats& s) {
    const std::size_t half = s.signed_hist.size() / 2;
    const double extent = s.hi - s.lo;
    if (half == 0 || !(extent > 0)) return {-s.lo, s.hi};
    tensor_stats side;  // one side as an |x| histogram over [0, amax]: entropy_threshold's bin edges
    side.lo = 0;
    side.hi = s.amax();
    side.hist.resize(half);
    std::pair<double, double> out;
    for (int positive = 0; positive < 2; ++positive) {
        for (std::size_t b = 0; b < half; ++b) side.hist[b] = s.signed_hist[positive ? half + b : half - 1 - b];
        const double reach = positive ? s.hi : -s.lo;
        const auto levels = std::max<std::size_t>(8, static_cast<std::size_t>(std::lround(256.0 * reach / extent)));
        const double t = std::min(reach, entropy_threshold(side, levels));
        (positive ? out.second : out.first) = t;
    }
    return out;
}

struct activation_params {
    type t = type::uint8;
    double lo = 0, hi = 0;  // the range quantized (clipped by percentile / entropy)
    float scale = 1;
    std::int64_t zero_point = 0;
};

// fp8 e4m3fn's largest finite value: a tensor's amax maps to it.
constexpr double fp8_max = 448.0;

activation_params choose_params(const tensor_stats& s, input_kind kind, const int8_options& o, bool fp8) {
    activation_params a;
    a.lo = std::isfinite(s.lo) ? s.lo : 0.0;
    a.hi = std::isfinite(s.hi) ? s.hi : 0.0;
    if (o.method == calibration_method::entropy && kind == input_kind::activation_u8 && a.lo < 0 &&
        !s.signed_hist.empty()) {
        const auto [neg, pos] = two_sided_entropy_thresholds(s);
        a.lo = std::max(a.lo, -neg);
        a.hi = std::min(a.hi, pos);
    } else if (o.method != calibration_method::minmax) {
        const double t = o.method == calibration_method::percentile
                             ? percentile_threshold(s, o.percentile)
                             : entropy_threshold(s, kind == input_kind::activation_u8 ? 256 : 128);
        a.lo = std::max(a.lo, -t);
        a.hi = std::min(a.hi, t);
    }
    // The range always holds 0, so that zero padding and ReLU's zeros are exact.
    a.lo = std::min(a.lo, 0.0);
    a.hi = std::max(a.hi, 0.0);
    if (fp8) {  // symmetric: fp8 has no zero point
        a.t = type::float8e4m3fn;
        const double amax = std::max(-a.lo, a.hi);
        a.scale = amax > 0 ? static_cast<float>(amax / fp8_max) : 1.0f;
        return a;
    }
    if (kind == input_kind::activation_s8) {
        a.t = type::int8;
        const double amax = std::max(-a.lo, a.hi);
        a.scale = amax > 0 ? static_cast<float>(amax / 127.0) : 1.0f;
        a.zero_point = 0;
        return a;
    }
    a.t = type::uint8;
    const double range = a.hi - a.lo;
    if (!(range > 0)) return a;  // a constant 0: scale 1, zero point 0
    a.scale = static_cast<float>(range / 255.0);
    a.zero_point = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::nearbyint(-a.lo / a.scale)), 0, 255);
    return a;
}

// int8 weights and their scales: symmetric, per channel along `axis` or per tensor.
struct quantized_weights {
    literal values;
    literal scales;
    literal zero_points;
    float scale_min = 0, scale_max = 0;
};

quantized_weights quantize_weights(const literal& w, std::optional<std::size_t> axis) {
    const auto& s = w.get_shape();
    const auto lens = s.lens();
    const auto v = w.to_vector<float>();
    const std::size_t channels = axis ? lens[*axis] : 1;
    std::size_t inner = 1;  // elements after the axis
    if (axis)
        for (std::size_t d = *axis + 1; d < lens.size(); ++d) inner *= lens[d];
    auto channel_of = [&](std::size_t i) { return axis ? (i / inner) % channels : 0; };
    std::vector<float> amax(channels, 0.0f);
    for (std::size_t i = 0; i < v.size(); ++i)
        if (std::isfinite(v[i])) amax[channel_of(i)] = std::max(amax[channel_of(i)], std::fabs(v[i]));
    std::vector<float> scales(channels);
    for (std::size_t c = 0; c < channels; ++c) scales[c] = amax[c] > 0 ? amax[c] / 127.0f : 1.0f;
    std::vector<std::int8_t> q(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        float r = std::nearbyint(v[i] / scales[channel_of(i)]);
        if (std::isnan(r)) r = 0;
        q[i] = static_cast<std::int8_t>(std::clamp(r, -127.0f, 127.0f));
    }
    quantized_weights out;
    out.values = literal(shape(type::int8, lens), q);
    if (axis) {
        out.scales = literal(shape(type::float32, {channels}), scales);
        out.zero_points = literal(shape(type::int8, {channels}), std::vector<std::int8_t>(channels, 0));
    } else {
        out.scales = literal(shape(type::float32), scales);
        out.zero_points = literal(shape(type::int8), std::vector<std::int8_t>{0});
    }
    out.scale_min = *std::min_element(scales.begin(), scales.end());
    out.scale_max = *std::max_element(scales.begin(), scales.end());
    return out;
}

// fp8 e4m3fn weights with one scale (amax / 448): the per-tensor scale cuBLASLt's fp8
// matmuls take.
quantized_weights quantize_weights_fp8(const literal& w) {
    const auto v = w.to_vector<float>();
    float amax = 0;
    for (float x : v)
        if (std::isfinite(x)) amax = std::max(amax, std::fabs(x));
    const float scale = amax > 0 ? static_cast<float>(amax / fp8_max) : 1.0f;
    std::vector<fp8e4m3fn> q(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) q[i] = fp8e4m3fn(v[i] / scale, true);  // saturating
    quantized_weights out;
    out.values = literal(shape(type::float8e4m3fn, w.get_shape().lens()), q);
    out.scales = literal(shape(type::float32), std::vector<float>{scale});
    out.scale_min = out.scale_max = scale;
    return out;
}

std::string json_number(double v) {
    if (!std::isfinite(v)) return "null";
    std::ostringstream os;
    os << std::setprecision(9) << v;
    return os.str();
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

}  // namespace

calibration_method calibration_method_from_name(const std::string& name) {
    if (name == "minmax") return calibration_method::minmax;
    if (name == "percentile") return calibration_method::percentile;
    if (name == "entropy") return calibration_method::entropy;
    throw_error(error_code::invalid_argument,
                "unknown calibration method '" + name + "' (minmax, percentile or entropy)");
}

void set_residual_adds(int8_options& o, const std::string& name) {
    if (name == "fuse") o.quantize_adds = o.fuse_residual = true;
    else if (name == "quant_add") o.quantize_adds = true, o.fuse_residual = false;
    else if (name == "float") o.quantize_adds = o.fuse_residual = false;
    else throw_error(error_code::invalid_argument, "unknown residual-add mode '" + name + "' (fuse, quant_add or float)");
}

std::string residual_adds_name(const int8_options& o) {
    return !o.quantize_adds ? "float" : o.fuse_residual ? "fuse" : "quant_add";
}

std::string calibration_method_name(calibration_method m) {
    switch (m) {
        case calibration_method::minmax: return "minmax";
        case calibration_method::percentile: return "percentile";
        case calibration_method::entropy: return "entropy";
    }
    return "minmax";
}

namespace {

int8_summary quantize_calibrated(program& p, const target& t, const std::vector<param_map>& calibration,
                                 const int8_options& options, bool fp8) {
    const std::string fname = fp8 ? "quantize_fp8" : "quantize_int8";
    const auto started = std::chrono::steady_clock::now();
    if (p.is_compiled()) throw_error(error_code::invalid_argument, "quantize: the program is already compiled (quantize before compile)");
    if (quantized_type(p) != type::float32)
        throw_error(error_code::invalid_argument, fname + ": the program is already quantized (" +
                                                      std::string(type_name(quantized_type(p))) + ")");
    const auto names = int8_op_names(options.ops);
    if (calibration.empty())
        throw_error(error_code::invalid_argument, fname + ": no calibration data (give at least one set of inputs)");
    if (options.method == calibration_method::percentile && !(options.percentile > 50 && options.percentile <= 100))
        throw_error(error_code::invalid_argument, fname + ": percentile must be in (50, 100], not " +
                                                      json_number(options.percentile));
    module& m = *p.get_main_module();
    int8_summary summary;

    // 1. The ops to quantize and the activations they read.
    std::vector<op_plan> plans;
    std::vector<instruction_ref> tensors;                       // to calibrate, in module order of first use
    std::unordered_map<const instruction*, std::size_t> index;  // tensor -> its position in `tensors`
    std::unordered_map<const instruction*, input_kind> kinds;
    std::vector<std::string> tensor_names, reader_names;  // in the text form before the rewrite
    std::set<const instruction*> all_readers_dequantized;  // tensors whose Q/DQ follows them directly
    // Activation x read as `kind` by `reader` (its name in the scales file).
    auto note_read = [&](instruction_ref x, input_kind kind, const std::string& reader) {
        if (!index.count(&*x)) {
            index.emplace(&*x, tensors.size());
            tensors.push_back(x);
            kinds.emplace(&*x, kind);
            tensor_names.push_back(m.instruction_name(&*x) + (x->is_param() ? "" : " " + x->name()));
            reader_names.push_back(reader);
        } else {
            auto& r = reader_names[index.at(&*x)];
            if (r.find(reader) == std::string::npos) r += ", " + reader;
        }
        // Read as u8 by one op and as s8 by another: s8 for both is the one form both take.
        if (kinds.at(&*x) != kind) kinds[&*x] = input_kind::activation_s8;
    };
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!names.count(ins->name())) continue;
        op_plan plan;
        const auto why = plan_op(ins, plan);
        if (!why.empty()) {
            summary.skipped.push_back(m.instruction_name(&*ins) + " " + ins->name() + ": " + why);
            continue;
        }
        for (auto [i, kind] : plan.activations)
            note_read(ins->inputs()[i], kind, json_string(m.instruction_name(&*ins) + " " + ins->name()));
        plan.name = m.instruction_name(&*ins);
        plans.push_back(plan);
    }
    if (options.quantize_adds && !fp8) {
        // Residual adds whose result (through one Relu/Clip) is quantized anyway, for a
        // chosen reader: their inputs are quantized too, so that fuse_qdq makes the add a
        // quant_add and each product before it requantizes to 8 bits, as in quantized ONNX
        // CNNs. Measured (AMD Zen 5, 2 threads): ResNet-50 --int8 13.8 -> ~6.5 ms at batch 1;
        // float adds between int8 convolutions cost a dequantized float32 tensor per block.
        // An add read by anything else (bert's LayerNorm) stays float32.
        // The add's result, or its Relu/Clip, when a chosen op reads it as u8.
        auto quantized_later = [&](instruction_ref y) -> std::optional<instruction_ref> {
            if (rewrite::is_output(m, y)) return std::nullopt;
            if (y->outputs().size() == 1 && (is<op::relu_op>(y->outputs().front()) || is<op::clip_op>(y->outputs().front())))
                y = y->outputs().front();
            if (rewrite::is_output(m, y) || !index.count(&*y) || kinds.at(&*y) != input_kind::activation_u8)
                return std::nullopt;
            return y;
        };
        std::set<const instruction*> chosen_adds;
        // Convolutions that will be quantized (fuse_residual: one may take the add).
        std::set<const instruction*> chosen_convs;
        for (const auto& pl : plans)
            if (is<op::convolution>(pl.ins)) chosen_convs.insert(&*pl.ins);
        std::set<const instruction*> residual_convs;  // already taken by an add
        // Input i of `add` is a chosen convolution read by nothing but the add.
        auto fusable_conv = [&](instruction_ref add, std::size_t i) {
            auto c = add->inputs()[i];
            return options.fuse_residual && chosen_convs.count(&*c) && !residual_convs.count(&*c) &&
                   c->outputs().size() == 1 && c->outputs().front() == add && !rewrite::is_output(m, c) &&
                   !index.count(&*c);
        };
        for (bool grew = true; grew;) {  // an add read by a chosen add is quantized later too
            grew = false;
            for (auto ins = m.begin(); ins != m.end(); ++ins) {
                if (!is<op::add_op>(ins) || chosen_adds.count(&*ins) || !is_f32(ins)) continue;
                const auto& in = ins->inputs();
                if (in.size() != 2 || !is_f32(in[0]) || !is_f32(in[1]) || in[0]->is_literal() || in[1]->is_literal() ||
                    in[0]->get_shape() != in[1]->get_shape() || in[0]->get_shape() != ins->get_shape())
                    continue;
                const auto y = quantized_later(ins);
                if (!y) continue;
                chosen_adds.insert(&*ins);
                // Every reader of y reads it dequantized (a float32 one as well, e.g. the
                // last add before a pooling), so that its Q is y's only reader and the add
                // with its Relu fuses.
                all_readers_dequantized.insert(&**y);
                grew = true;
                op_plan plan;
                plan.ins = ins;
                plan.name = m.instruction_name(&*ins);
                // One input a convolution read only here (the later one when both are: a
                // downsampling block's projection and main path): no Q/DQ on it, its float
                // result goes into the add, and fuse_qdq makes conv + add + Relu + Q one
                // quant_convolution with a residual operand (the other input).
                std::optional<std::size_t> fused;
                if (fusable_conv(ins, 0)) fused = 0;
                if (fusable_conv(ins, 1)) {
                    bool second_later = !fused;
                    for (auto it = in[0]; !second_later && it != ins; ++it) second_later = it == in[1];
                    if (second_later) fused = 1;
                }
                if (fused) {
                    residual_convs.insert(&*in[*fused]);
                    ++summary.residual_convolutions;
                }
                for (std::size_t i = 0; i < 2; ++i) {
                    if (fused == i) continue;
                    plan.activations.push_back({i, input_kind::activation_u8});
                    note_read(in[i], input_kind::activation_u8, json_string(plan.name + " add"));
                }
                plans.push_back(plan);
                ++summary.quantized_adds;
            }
        }
    }
    // Max pools whose result is quantized for a chosen op: their input gets the same scale
    // and zero point, which changes no value (Q is monotone, so Q(max) = max(Q)), and
    // fuse_qdq runs the pool on the 8-bit values; the product before it requantizes.
    std::unordered_map<const instruction*, const instruction*> same_params;  // input -> pool's result
    if (!fp8) {
        for (auto ins = m.begin(); ins != m.end(); ++ins) {
            const auto* pool = ins->get_operator().any_cast<op::pooling>();
            if (!pool || pool->mode != op::pooling_mode::max || ins->inputs().size() != 1 || !is_f32(ins)) continue;
            auto x = ins->inputs()[0];
            if (!is_f32(x) || x->is_literal() || index.count(&*x) || x->outputs().size() != 1 ||
                rewrite::is_output(m, x) || rewrite::is_output(m, ins) || !index.count(&*ins) ||
                kinds.at(&*ins) != input_kind::activation_u8)
                continue;
            op_plan plan;
            plan.ins = ins;
            plan.name = m.instruction_name(&*ins);
            plan.activations.push_back({0, input_kind::activation_u8});
            note_read(x, input_kind::activation_u8, json_string(plan.name + " pooling"));
            same_params.emplace(&*x, &*ins);
            plans.push_back(plan);
        }
    }
    // Each instruction's place in the module (which step 2's copy shares).
    std::unordered_map<const instruction*, std::size_t> position;
    {
        std::size_t k = 0;
        for (auto it = m.begin(); it != m.end(); ++it) position.emplace(&*it, k++);
    }
    // The rewrite inserts each activation's Q/DQ before its first reader in `plans`: keep
    // them in module order.
    std::stable_sort(plans.begin(), plans.end(),
                     [&](const op_plan& a, const op_plan& b) { return position.at(&*a.ins) < position.at(&*b.ins); });

    // 2. Calibrate: a copy that also returns every tensor, compiled for `t`.
    std::vector<tensor_stats> stats(tensors.size());
    if (!tensors.empty()) {
        program copy = p;
        module& cm = *copy.get_main_module();
        std::vector<instruction_ref> by_position;
        for (auto it = cm.begin(); it != cm.end(); ++it) by_position.push_back(it);
        auto ret = cm.get_return();
        if (ret == cm.end()) throw_error(error_code::invalid_argument, fname + ": the program has no @return");
        std::vector<instruction_ref> outs = ret->inputs();
        const std::size_t first_extra = outs.size();
        for (auto x : tensors) outs.push_back(by_position.at(position.at(&*x)));
        cm.remove_instruction(ret);
        cm.add_return(outs);
        auto out_names = copy.get_output_names();
        out_names.resize(first_extra);
        for (std::size_t i = 0; i < tensors.size(); ++i) out_names.push_back("kiln_calibration_" + std::to_string(i));
        copy.set_output_names(out_names);
        compile_options co;
        co.specialize_after = 0;  // calibration sets of new shapes run on the generic program
        copy.compile(t, co);
        const bool histograms = options.method != calibration_method::minmax;
        const std::size_t total = calibration.size() * (histograms ? 2 : 1);
        std::size_t done = 0;
        for (int pass = 0; pass < (histograms ? 2 : 1); ++pass) {
            for (const auto& set : calibration) {
                const auto results = copy.eval(set);
                for (std::size_t i = 0; i < tensors.size(); ++i) {
                    if (pass == 0) update_range(stats[i], results.at(first_extra + i));
                    else update_histogram(stats[i], results.at(first_extra + i));
                }
                ++summary.calibration_runs;
                if (options.progress) options.progress(++done, total);
            }
        }
    }

    // 3. Rewrite: Q -> DQ after each activation (before its first chosen reader), DQ of int8 weights.
    std::vector<activation_params> params(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) params[i] = choose_params(stats[i], kinds.at(&*tensors[i]), options, fp8);
    for (const auto& [x, y] : same_params) params[index.at(x)] = params[index.at(y)];
    std::unordered_map<const instruction*, instruction_ref> dequantized;  // tensor -> its DQ
    std::ostringstream weights_json;
    bool first_weight = true;
    for (auto& plan : plans) {
        auto ins = plan.ins;
        std::vector<instruction_ref> args = ins->inputs();
        for (auto [i, kind] : plan.activations) {
            auto x = args[i];
            auto it = dequantized.find(&*x);
            if (it == dequantized.end()) {
                const auto& a = params.at(index.at(&*x));
                // Right after x where every reader will read the DQ, else before this reader.
                const auto at = all_readers_dequantized.count(&*x) ? std::next(x) : ins;
                auto s = m.insert_literal(at, literal(shape(type::float32), std::vector<float>{a.scale}));
                if (fp8) {
                    op::quantize_linear_op qop;
                    qop.output_type = a.t;
                    auto q = m.insert_instruction(at, qop, {x, s});
                    it = dequantized.emplace(&*x, m.insert_instruction(at, op::dequantize_linear_op{}, {q, s})).first;
                    args[i] = it->second;
                    continue;
                }
                auto z = a.t == type::uint8
                             ? m.insert_literal(at, literal(shape(type::uint8), std::vector<std::uint8_t>{
                                                                                     static_cast<std::uint8_t>(a.zero_point)}))
                             : m.insert_literal(at, literal(shape(type::int8), std::vector<std::int8_t>{
                                                                                    static_cast<std::int8_t>(a.zero_point)}));
                op::quantize_linear_op qop;
                qop.output_type = a.t;
                auto q = m.insert_instruction(at, qop, {x, s, z});
                auto dq = m.insert_instruction(at, op::dequantize_linear_op{}, {q, s, z});
                it = dequantized.emplace(&*x, dq).first;
            }
            args[i] = it->second;
        }
        if (plan.weights) {
            auto w = args[plan.weights->input];
            if (fp8) plan.weights->axis.reset();
            auto qw = fp8 ? quantize_weights_fp8(w->get_literal()) : quantize_weights(w->get_literal(), plan.weights->axis);
            auto wq = m.insert_literal(ins, qw.values);
            auto s = m.insert_literal(ins, qw.scales);
            op::dequantize_linear_op dq;
            dq.axis = static_cast<std::int64_t>(plan.weights->axis.value_or(1));
            if (fp8) args[plan.weights->input] = m.insert_instruction(ins, dq, {wq, s});
            else args[plan.weights->input] = m.insert_instruction(ins, dq, {wq, s, m.insert_literal(ins, qw.zero_points)});
            weights_json << (first_weight ? "" : ",\n") << "    {\"op\": " << json_string(plan.name)
                         << ", \"kind\": " << json_string(ins->name()) << ", \"channels\": " << qw.scales.get_shape().elements()
                         << ", \"per_channel\": " << (plan.weights->axis ? "true" : "false")
                         << ", \"scale_min\": " << json_number(qw.scale_min) << ", \"scale_max\": " << json_number(qw.scale_max)
                         << "}";
            first_weight = false;
        }
        const bool product = !is<op::add_op>(ins) && !is<op::pooling>(ins);
        m.replace_instruction(ins, ins->get_operator(), args);
        if (product) ++summary.quantized_ops;
    }
    for (const auto* y : all_readers_dequantized) {
        const auto dq = dequantized.at(y);
        const auto q = dq->inputs()[0];
        auto yi = q->inputs()[0];
        for (auto r : std::vector<instruction_ref>(yi->outputs()))
            if (r != q) m.replace_argument(r, yi, dq);
    }
    dead_code_elimination{}.apply(m);  // the float32 weights nobody reads now
    summary.activation_tensors = tensors.size();

    auto meta = p.get_metadata();
    if (!meta.is_object()) meta = value::make_object();
    meta["quantized"] = std::string(fp8 ? "float8e4m3fn" : "int8");
    meta[fp8 ? "fp8_calibration" : "int8_calibration"] = calibration_method_name(options.method) + ", " + std::to_string(calibration.size()) +
                               " sets, " + std::to_string(summary.quantized_ops) + " ops";
    p.set_metadata(meta);

    summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!options.dump_scales.empty()) {
        std::ostringstream os;
        os << "{\n  \"method\": " << json_string(calibration_method_name(options.method));
        if (options.method == calibration_method::percentile) os << ", \"percentile\": " << json_number(options.percentile);
        os << ", \"calibration_sets\": " << calibration.size() << ",\n  \"activations\": [\n";
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            const auto& a = params[i];
            os << "    {\"tensor\": " << json_string(tensor_names[i]) << ", \"readers\": [" << reader_names[i] << "], \"type\": " << json_string(std::string(type_name(a.t)))
               << ", \"seen_min\": " << json_number(stats[i].lo) << ", \"seen_max\": " << json_number(stats[i].hi)
               << ", \"min\": " << json_number(a.lo) << ", \"max\": " << json_number(a.hi)
               << ", \"scale\": " << json_number(a.scale) << ", \"zero_point\": " << a.zero_point << "}"
               << (i + 1 < tensors.size() ? ",\n" : "\n");
        }
        os << "  ],\n  \"weights\": [\n" << weights_json.str() << (first_weight ? "" : "\n") << "  ],\n  \"skipped\": [";
        for (std::size_t i = 0; i < summary.skipped.size(); ++i) os << (i ? ", " : "") << json_string(summary.skipped[i]);
        os << "]\n}\n";
        std::ofstream f(options.dump_scales);
        f << os.str();
        if (!f) throw_error(error_code::runtime, fname + ": cannot write the scales to '" + options.dump_scales + "'");
    }
    return summary;
}

}  // namespace

int8_summary quantize_int8(program& p, const target& t, const std::vector<param_map>& calibration,
                           const int8_options& options) {
    return quantize_calibrated(p, t, calibration, options, false);
}

int8_summary quantize_fp8(program& p, const target& t, const std::vector<param_map>& calibration,
                          const int8_options& options) {
    return quantize_calibrated(p, t, calibration, options, true);
}

}  // namespace kiln
