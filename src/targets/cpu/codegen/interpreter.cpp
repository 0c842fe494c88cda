#include "targets/cpu/codegen/interpreter.hpp"

#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"

#include <kiln/errors.hpp>

#include <cmath>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace kiln::cpu::codegen {

namespace {

constexpr std::size_t tile = 256;

using tile_fn = void (*)(const operation&, const float* const*, float*, std::size_t);

template <class T, class... Ts>
constexpr bool only(op::type_list<Ts...>) {
    return sizeof...(Ts) == 1 && (std::is_same_v<T, Ts> && ...);
}

// Argument I of Fn from a float tile value: bool where the op takes bool.
template <class Fn, std::size_t I>
auto arg(float x) {
    if constexpr (((Fn::bool_inputs >> I) & 1u) != 0 || only<bool>(typename Fn::types{})) return x != 0.0f;
    else return x;
}

template <class Fn, std::size_t... I>
void run_pointwise(const operation& o, const float* const* a, float* r, std::size_t n, std::index_sequence<I...>) {
    const auto& f = o.get<op::pointwise<Fn>>();
    for (std::size_t i = 0; i < n; ++i) r[i] = static_cast<float>(f.apply(arg<Fn, I>(a[I][i])...));
}

template <class Fn>
void pointwise_tile(const operation& o, const float* const* a, float* r, std::size_t n) {
    run_pointwise<Fn>(o, a, r, n, std::make_index_sequence<Fn::arity>{});
}

#define KILN_INTERPRETED_OPS(X)                                                                                    \
    X(exp) X(log) X(sqrt) X(reciprocal) X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(asinh)      \
    X(acosh) X(atanh) X(tanh) X(floor) X(ceil) X(round) X(sigmoid) X(softplus) X(softsign) X(hard_swish) X(mish) \
    X(abs) X(neg) X(sign) X(erf) X(relu) X(leaky_relu) X(elu) X(selu) X(celu) X(hard_sigmoid)                    \
    X(thresholded_relu) X(gelu) X(swish) X(isnan) X(isinf) X(shrink) X(logical_not) X(add) X(sub) X(mul) X(div) \
    X(pow) X(mod) X(max) X(min) X(logical_and) X(logical_or) X(logical_xor) X(equal) X(less) X(greater)          \
    X(less_or_equal) X(greater_or_equal) X(prelu) X(swiglu) X(where) X(clip)

const std::unordered_map<std::string, tile_fn>& tile_functions() {
#define KILN_TILE_ENTRY(BASE) {op::BASE##_fn::name, &pointwise_tile<op::BASE##_fn>},
    static const std::unordered_map<std::string, tile_fn> table = {KILN_INTERPRETED_OPS(KILN_TILE_ENTRY)};
#undef KILN_TILE_ENTRY
    return table;
}

float load(type t, const void* base, std::int64_t i) {
    switch (t) {
        case type::float32: return static_cast<const float*>(base)[i];
        case type::bool_: return static_cast<const bool*>(base)[i] ? 1.0f : 0.0f;
        case type::float64: return convert<float>(static_cast<const double*>(base)[i]);
        case type::int8: return convert<float>(static_cast<const std::int8_t*>(base)[i]);
        case type::int16: return convert<float>(static_cast<const std::int16_t*>(base)[i]);
        case type::int32: return convert<float>(static_cast<const std::int32_t*>(base)[i]);
        case type::int64: return convert<float>(static_cast<const std::int64_t*>(base)[i]);
        case type::uint8: return convert<float>(static_cast<const std::uint8_t*>(base)[i]);
        case type::uint16: return convert<float>(static_cast<const std::uint16_t*>(base)[i]);
        case type::uint32: return convert<float>(static_cast<const std::uint32_t*>(base)[i]);
        case type::uint64: return convert<float>(static_cast<const std::uint64_t*>(base)[i]);
        default: throw_error(error_code::unsupported, "fused interpreter: cannot read " + std::string(type_name(t)));
    }
}

void store(type t, void* base, std::int64_t i, float v) {
    if (t == type::bool_) static_cast<bool*>(base)[i] = v != 0.0f;
    else static_cast<float*>(base)[i] = v;
}

// Offsets of `count` consecutive flat indices from `first` over lens/strides (row-major).
// `idx` is scratch of at least lens.size() entries.
void offsets(const std::vector<std::size_t>& lens, const std::vector<std::int64_t>& strides, std::int64_t base,
             std::size_t first, std::size_t count, std::int64_t* out, std::size_t* idx) {
    const std::size_t m = lens.size();
    if (m == 1) {
        for (std::size_t t = 0; t < count; ++t) out[t] = base + static_cast<std::int64_t>(first + t) * strides[0];
        return;
    }
    std::size_t r = first;
    for (std::size_t d = m; d-- > 0;) {
        idx[d] = r % lens[d];
        r /= lens[d];
    }
    std::int64_t off = base;
    for (std::size_t d = 0; d < m; ++d) off += static_cast<std::int64_t>(idx[d]) * strides[d];
    for (std::size_t t = 0; t < count; ++t) {
        out[t] = off;
        for (std::size_t d = m; d-- > 0;) {
            off += strides[d];
            if (++idx[d] < lens[d]) break;
            off -= static_cast<std::int64_t>(lens[d]) * strides[d];
            idx[d] = 0;
        }
    }
}

enum class red : std::uint8_t { sum, mean, max, min, prod, l1, l2, sum_square, log_sum };

red red_of(const std::string& name) {
    const auto k = reduction_kind(name);
    if (k == "mean") return red::mean;
    if (k == "max") return red::max;
    if (k == "min") return red::min;
    if (k == "prod") return red::prod;
    if (k == "l1") return red::l1;
    if (k == "l2") return red::l2;
    if (k == "sum_square") return red::sum_square;
    if (k == "log_sum") return red::log_sum;
    return red::sum;
}

template <class T>
void fit(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
}
template <class T>
void fit(std::vector<std::vector<T>>& v, std::size_t n, std::size_t inner) {
    if (v.size() < n) v.resize(n);
    for (std::size_t i = 0; i < n; ++i) fit(v[i], inner);
}

// Per-thread working memory, kept between calls: once a thread has run the largest plan
// it meets, evaluation allocates nothing (a program's eval must not allocate).
struct scratch {
    std::vector<std::vector<float>> buf;         // element nodes: the current tile
    std::vector<float> val;                      // scalar nodes: their value (per call or per row)
    std::vector<std::vector<float>> bcast;       // scalar arguments spread over a tile
    std::vector<std::vector<std::int64_t>> off;  // per input: element offsets of the tile
    std::vector<std::int64_t> base;              // per input (and the output last): the row's base offset
    std::vector<std::int64_t> out_off;
    std::vector<const float*> args;
    std::vector<tile_fn> fns;                    // per node: its tile function (op nodes)
    std::vector<char> need;
    std::vector<std::size_t> stack, idx;
    std::vector<std::vector<std::size_t>> lists;  // reductions: per pass, then the final loop
    std::vector<std::vector<std::size_t>> reds;   // reductions: the reduce nodes of each pass
    std::vector<red> kinds;
    std::vector<double> acc;
    std::vector<char> nan;
};

scratch& thread_scratch() {
    thread_local scratch s;
    return s;
}

struct runner {
    const plan& p;
    const void* const* in;
    void* out;
    scratch& s;

    runner(const plan& pl, const void* const* i, void* o) : p(pl), in(i), out(o), s(thread_scratch()) {
        const std::size_t n = p.nodes.size();
        fit(s.buf, n, tile);
        fit(s.val, n);
        fit(s.bcast, 4, tile);
        fit(s.off, p.inputs.size(), tile);
        fit(s.base, p.inputs.size() + 1);
        fit(s.out_off, tile);
        fit(s.fns, n);
        fit(s.need, n);
        fit(s.kinds, n);
        fit(s.acc, n);
        fit(s.nan, n);
        fit(s.idx, std::max(p.outer_lens.size(), p.inner_lens.size()));
        if (s.args.capacity() < 4) s.args.reserve(4);
        if (s.stack.capacity() < n) s.stack.reserve(n);
        for (std::size_t k = 0; k < n; ++k) {
            const auto& nd = p.nodes[k];
            if (nd.kind == node_kind::constant) s.val[k] = static_cast<float>(nd.value);
            else if (nd.kind == node_kind::input && p.inputs[nd.input].invariant()) s.val[k] = load(nd.t, in[nd.input], 0);
            s.fns[k] = nullptr;
            if (nd.kind == node_kind::op && nd.name != "convert") {
                auto it = tile_functions().find(nd.name);
                if (it == tile_functions().end())
                    throw_error(error_code::unsupported, "fused interpreter: no kernel for " + nd.name);
                s.fns[k] = it->second;
            }
            if (nd.kind == node_kind::reduce) s.kinds[k] = red_of(nd.name);
        }
    }

    bool scalar(std::size_t k) const {
        const auto& n = p.nodes[k];
        return n.kind == node_kind::constant || (n.kind == node_kind::input && p.inputs[n.input].invariant()) ||
               (p.reduction && n.row);
    }

    const float* value_of(std::size_t a, std::size_t slot, std::size_t n) {
        if (!scalar(a)) return s.buf[a].data();
        std::fill(s.bcast[slot].begin(), s.bcast[slot].begin() + static_cast<std::ptrdiff_t>(n), s.val[a]);
        return s.bcast[slot].data();
    }

    // Node k over n values (n = 1 for scalar nodes); arguments already computed.
    void compute(std::size_t k, std::size_t n) {
        const auto& nd = p.nodes[k];
        float* r = scalar(k) ? &s.val[k] : s.buf[k].data();
        if (nd.kind == node_kind::input) {
            if (scalar(k)) *r = load(nd.t, in[nd.input], s.base[nd.input]);
            else
                for (std::size_t t = 0; t < n; ++t) r[t] = load(nd.t, in[nd.input], s.off[nd.input][t]);
            return;
        }
        s.args.clear();
        for (std::size_t j = 0; j < nd.args.size(); ++j)
            s.args.push_back(scalar(k) ? &s.val[nd.args[j]] : value_of(nd.args[j], j, n));
        if (nd.name == "convert") {
            // Inputs were converted to float when loaded; only a cast to bool is left.
            for (std::size_t t = 0; t < n; ++t)
                r[t] = nd.t == type::bool_ ? (s.args[0][t] != 0.0f ? 1.0f : 0.0f) : s.args[0][t];
            return;
        }
        s.fns[k](nd.op, s.args.data(), r, n);
    }

    // The element nodes the loop computing `targets` needs, in order, into `list`.
    template <class Targets>
    void needed(const Targets& targets, std::vector<std::size_t>& list) {
        std::fill(s.need.begin(), s.need.begin() + static_cast<std::ptrdiff_t>(p.nodes.size()), 0);
        s.stack.clear();
        for (auto t : targets) s.stack.push_back(t);
        while (!s.stack.empty()) {
            auto k = s.stack.back();
            s.stack.pop_back();
            if (s.need[k] || scalar(k)) continue;
            s.need[k] = 1;
            for (auto a : p.nodes[k].args) s.stack.push_back(a);
        }
        list.clear();
        for (std::size_t k = 0; k < p.nodes.size(); ++k)
            if (s.need[k]) list.push_back(k);
    }

    void elementwise(std::size_t begin, std::size_t end) {
        const auto& L = p.outer_lens;
        const std::size_t N = L.back();
        fit(s.lists, 1, 0);
        auto& list = s.lists[0];
        const std::size_t root[1] = {p.root};
        needed(root, list);
        std::size_t* idx = s.idx.data();
        for (std::size_t i = begin; i < end;) {
            const std::size_t row = i / N, j0 = i % N, n = std::min(N - j0, end - i);
            // Base offsets of the row (all outer dims but the last).
            std::size_t r = row;
            for (std::size_t d = L.size() - 1; d-- > 0;) {
                idx[d] = r % L[d];
                r /= L[d];
            }
            auto row_base = [&](const access& a) {
                std::int64_t b = 0;
                for (std::size_t d = 0; d + 1 < L.size(); ++d) b += static_cast<std::int64_t>(idx[d]) * a.outer[d];
                return b;
            };
            for (std::size_t t0 = 0; t0 < n; t0 += tile) {
                const std::size_t m = std::min(tile, n - t0);
                for (std::size_t k = 0; k < p.inputs.size(); ++k) {
                    const auto b = row_base(p.inputs[k]);
                    for (std::size_t t = 0; t < m; ++t)
                        s.off[k][t] = b + static_cast<std::int64_t>(j0 + t0 + t) * p.inputs[k].outer.back();
                }
                for (auto k : list) compute(k, m);
                const auto ob = row_base(p.output);
                const float* v = s.buf[p.root].data();
                for (std::size_t t = 0; t < m; ++t)
                    store(p.output.t, out, ob + static_cast<std::int64_t>(j0 + t0 + t) * p.output.outer.back(), v[t]);
            }
            i += n;
        }
    }

    void reduction(std::size_t begin, std::size_t end) {
        const std::size_t count = p.inner_size();
        const std::size_t passes = p.passes;
        fit(s.lists, passes + 2, 0);
        fit(s.reds, passes + 1, 0);
        for (std::size_t q = 0; q <= passes; ++q) s.reds[q].clear();
        for (std::size_t k = 0; k < p.nodes.size(); ++k)
            if (p.nodes[k].kind == node_kind::reduce) s.reds[p.nodes[k].pass].push_back(k);
        for (std::size_t q = 1; q <= passes; ++q) {
            // The arguments of this pass's reductions (reds[0] is empty: no reduction has pass 0).
            auto& ins = s.reds[0];
            for (auto r : s.reds[q]) ins.push_back(p.nodes[r].args[0]);
            needed(ins, s.lists[q]);
            ins.clear();
        }
        auto& final_list = s.lists[passes + 1];
        if (p.row_output()) {
            final_list.clear();
        } else {
            const std::size_t root[1] = {p.root};
            needed(root, final_list);
        }
        std::size_t* idx = s.idx.data();
        for (std::size_t o = begin; o < end; ++o) {
            for (std::size_t k = 0; k <= p.inputs.size(); ++k) {
                const auto& a = k < p.inputs.size() ? p.inputs[k] : p.output;
                offsets(p.outer_lens, a.outer, 0, o, 1, &s.base[k], idx);
            }
            auto row_nodes = [&](std::size_t pass) {
                for (std::size_t k = 0; k < p.nodes.size(); ++k) {
                    const auto& n = p.nodes[k];
                    if (n.row && n.pass == pass && n.kind != node_kind::constant && n.kind != node_kind::reduce &&
                        !(n.kind == node_kind::input && p.inputs[n.input].invariant()))
                        compute(k, 1);
                }
            };
            auto tiles = [&](const std::vector<std::size_t>& list, auto&& each) {
                for (std::size_t q0 = 0; q0 < count; q0 += tile) {
                    const std::size_t m = std::min(tile, count - q0);
                    for (std::size_t k = 0; k < p.inputs.size(); ++k)
                        if (!p.inputs[k].row_level())
                            offsets(p.inner_lens, p.inputs[k].inner, s.base[k], q0, m, s.off[k].data(), idx);
                    for (auto k : list) compute(k, m);
                    each(q0, m);
                }
            };
            row_nodes(0);
            for (std::size_t q = 1; q <= passes; ++q) {
                for (auto r : s.reds[q]) {
                    const red kind = s.kinds[r];
                    s.acc[r] = kind == red::max   ? -std::numeric_limits<double>::infinity()
                               : kind == red::min ? std::numeric_limits<double>::infinity()
                               : kind == red::prod ? 1.0
                                                   : 0.0;
                    s.nan[r] = 0;
                }
                tiles(s.lists[q], [&](std::size_t, std::size_t m) {
                    for (auto r : s.reds[q]) {
                        const red kind = s.kinds[r];
                        const float* x = value_of(p.nodes[r].args[0], 0, m);
                        double& a = s.acc[r];
                        for (std::size_t t = 0; t < m; ++t) {
                            const double v = x[t];
                            switch (kind) {
                                case red::max:
                                    s.nan[r] |= std::isnan(v) ? 1 : 0;
                                    a = std::max(a, v);
                                    break;
                                case red::min:
                                    s.nan[r] |= std::isnan(v) ? 1 : 0;
                                    a = std::min(a, v);
                                    break;
                                case red::prod: a *= v; break;
                                case red::l1: a += std::fabs(v); break;
                                case red::l2:
                                case red::sum_square: a += v * v; break;
                                default: a += v; break;
                            }
                        }
                    }
                });
                for (auto r : s.reds[q]) {
                    const red kind = s.kinds[r];
                    double a = s.acc[r];
                    if (s.nan[r]) a = std::numeric_limits<double>::quiet_NaN();
                    else if (kind == red::mean) a /= static_cast<double>(p.reduce_count);
                    else if (kind == red::l2) a = std::sqrt(a);
                    else if (kind == red::log_sum) a = std::log(a);
                    s.val[r] = static_cast<float>(a);
                }
                row_nodes(q);
            }
            if (p.row_output()) {
                store(p.output.t, out, s.base[p.inputs.size()], s.val[p.root]);
                continue;
            }
            tiles(final_list, [&](std::size_t q0, std::size_t m) {
                offsets(p.inner_lens, p.output.inner, s.base[p.inputs.size()], q0, m, s.out_off.data(), idx);
                const float* v = s.buf[p.root].data();
                for (std::size_t t = 0; t < m; ++t) store(p.output.t, out, s.out_off[t], v[t]);
            });
        }
    }
};

}  // namespace

void interpret(const plan& p, const void* const* in, void* out, std::size_t begin, std::size_t end) {
    runner r(p, in, out);
    if (p.reduction) r.reduction(begin, end);
    else r.elementwise(begin, end);
}

}  // namespace kiln::cpu::codegen
