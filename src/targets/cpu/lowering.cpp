#include "targets/cpu/lowering.hpp"

#include "ops/nn_conv.hpp"

#include "targets/cpu/anchor_plan.hpp"
#include "targets/cpu/kernels/attention/attention.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/dw_fusion.hpp"
#include "targets/cpu/kernels/dynamic/dyn_primitive.hpp"
#include "targets/cpu/fusion.hpp"
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"
#include "targets/cpu/kernels/onednn/op_matmul.hpp"
#include "targets/cpu/selection.hpp"
#include "targets/cpu/kernels/silu/silu.hpp"

#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/tensor_views.hpp"
#include "passes/rewrite_utils.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace kiln::cpu {

namespace {

bool is_ref_impl(const std::string& impl) { return impl.find("ref") != std::string::npos; }

// Appends a post-op, folding a linear step into a linear step just before it.
void append_post_op(std::vector<post_op>& ops, const post_op& p) {
    if (p.kind == "eltwise" && p.algorithm == "linear" && !ops.empty() && ops.back().kind == "eltwise" &&
        ops.back().algorithm == "linear") {
        auto& q = ops.back();
        q.beta = p.alpha * q.beta + p.beta;
        q.alpha = p.alpha * q.alpha;
        return;
    }
    ops.push_back(p);
}

// oneDNN 2.6's gemm-based kernels fold the first linear post-op into the product's
// scale and then apply that scale for every later linear post-op too (the result of
// linear(2), linear(0.5) is 4x). Chains keep at most one linear step.
bool one_linear_at_most(const std::vector<post_op>& ops) {
    std::size_t n = 0;
    for (const auto& p : ops) n += p.kind == "eltwise" && p.algorithm == "linear" ? 1 : 0;
    return n <= 1;
}

template <class Op>
std::optional<std::string> try_impl(lower_env& env, const Op& op, const std::vector<shape>& shapes, const shape& dst,
                                    bool any_weights) {
    try {
        return impl_name(op.make_pd(env.ctx.engine(), shapes, dst, any_weights));
    } catch (const dnnl::error&) {
        return std::nullopt;
    } catch (const error& e) {
        if (e.code() == error_code::unsupported) return std::nullopt;
        throw;
    }
}

// Adds the chain (cut to the longest prefix oneDNN takes without falling back to its
// reference code) to a plan whose fixed part is set, and checks the whole.
// `extra_layout`: the layout full-size binary post-op inputs must have (the output's).
template <class Op>
std::optional<anchor_plan> finish_plan(lower_env& env, anchor_plan p, Op op, const fused_chain& chain,
                                       std::size_t bias_slot, const std::optional<md_record>& extra_layout) {
    const auto base_impl = try_impl(env, op, p.shapes, p.dst, p.constant_weights);
    if (!base_impl) return std::nullopt;
    for (std::size_t prefix = chain.steps.size(); prefix > 0; --prefix) {
        auto ch = truncate(chain, prefix);
        Op cand = op;
        auto q = p;
        if (ch.bias) {
            // The constant becomes operand `bias_slot` as a vector (one value per channel).
            q.operands.insert(q.operands.begin() + static_cast<std::ptrdiff_t>(bias_slot), *ch.bias);
            q.shapes.insert(q.shapes.begin() + static_cast<std::ptrdiff_t>(bias_slot),
                            shape(type::float32, {(*ch.bias)->get_shape().elements()}));
            q.wanted.insert(q.wanted.begin() + static_cast<std::ptrdiff_t>(bias_slot), std::nullopt);
            q.vector_operands.push_back(bias_slot);
            cand.has_bias = true;
        }
        const std::size_t base = q.operands.size();
        cand.layouts.resize(base);
        for (auto e : ch.extra) {
            const shape& s = e->get_shape();
            const bool full = s.lens() == p.dst.lens() && extra_layout;
            q.operands.push_back(e);
            q.shapes.push_back(s.lens() == p.dst.lens() ? s.as_standard() : s);
            q.wanted.push_back(full ? extra_layout : std::nullopt);
            cand.layouts.push_back(full ? *extra_layout : md_record{});
        }
        for (auto po : ch.post_ops) {
            if (po.kind == "binary") po.input += static_cast<std::int64_t>(base);
            append_post_op(cand.post_ops, po);
        }
        if (!one_linear_at_most(cand.post_ops)) continue;
        auto impl = try_impl(env, cand, q.shapes, p.dst, q.constant_weights);
        if (!impl || (is_ref_impl(*impl) && !is_ref_impl(*base_impl))) continue;
        q.chain = ch;
        q.op = cand;
        return q;
    }
    p.op = op;
    return p;
}

std::optional<anchor_plan> plan_conv(lower_env& env, instruction_ref ins,
                                     const std::unordered_set<const instruction*>& claimed) {
    if (!rewrite::is_any<op::convolution, op::deconvolution>(ins) || !all_f32_static(ins)) return std::nullopt;
    const auto& in = ins->inputs();
    if (in.size() < 2 || in.size() > 3 || in[0]->get_shape().ndim() < 3) return std::nullopt;
    convolution c;
    c.op = ins->get_operator();
    c.weights_shape = in[1]->get_shape();
    c.has_bias = in.size() == 3;
    anchor_plan p;
    p.anchor = ins;
    p.constant_weights = in[1]->is_literal();
    if (p.constant_weights) c.weights_shape = c.weights_shape.as_standard();
    p.dst = ins->get_shape().as_standard();
    p.operands = {in[0], in[1]};
    p.shapes = {in[0]->get_shape(), in[1]->get_shape()};
    if (c.has_bias) {
        p.operands.push_back(in[2]);
        p.shapes.push_back(in[2]->get_shape());
    }
    // oneDNN chooses the activations' layouts (blocked, nChw8c with AVX2, for most);
    // they are then fixed, so that the fused kernel sees what it was planned for.
    c.any_src = c.any_dst = true;
    // Not grouped (depthwise) ones: memory-bound, little for bf16 to save against the conversion
    // of x, and not measured to pay (the noisy machine could not tell). Nor those with fewer
    // than 64 output channels: few products per input value, and the conversion of x costs
    // more than bf16 saves (MobileNetV2's projections to 16, 24 and 32 channels, bench/ab.py,
    // Zen 5: 0.057 against 0.036 ms, 0.076 against 0.070, 0.029 against 0.024).
    const auto* plain_conv = ins->get_operator().any_cast<op::convolution>();
    constexpr std::size_t min_bf16_channels = 64;
    c.bf16 = env.ctx.bf16_convolutions && plain_conv && plain_conv->group == 1 &&
             ins->get_shape().lens().at(1) >= min_bf16_channels;
    if (env.blocked.count(&*ins)) {
        // Planned in 16-channel blocks (blocked_for_depthwise_fusion): src where its
        // channels fill whole blocks, the result always.
        if (in[0]->get_shape().lens()[1] % 16 == 0) {
            c.any_src = false;
            c.layouts = {pixel_channels_layout(16, in[0]->get_shape().lens())};
        }
        c.any_dst = false;
        c.dst_layout = pixel_channels_layout(16, p.dst.lens());
    }
    dnnl::memory::desc src_md, dst_md;
    try {
        auto pd = c.make_pd(env.ctx.engine(), p.shapes, p.dst, p.constant_weights);
        // A bf16 kernel reads x as float32 in the same layout (converted as it runs).
        src_md = retyped(pd.src_desc(), dnnl::memory::data_type::f32);
        dst_md = pd.dst_desc();
    } catch (const dnnl::error&) {
        return std::nullopt;
    } catch (const error& e) {
        if (e.code() == error_code::unsupported) return std::nullopt;
        throw;
    }
    if (!md_record::representable(src_md) || !md_record::representable(dst_md)) return std::nullopt;
    c.any_src = c.any_dst = false;
    c.layouts = {md_record::from(src_md)};
    c.dst_layout = md_record::from(dst_md);
    p.wanted.assign(p.operands.size(), std::nullopt);
    p.wanted[0] = c.layouts[0];
    auto chain = find_post_ops(ins, 1, !c.has_bias, claimed, own_silu_enabled(env.ctx.options()));
    return finish_plan(env, p, c, chain, 2, c.dst_layout);
}

// A product whose only reader is a transpose that reshapes then copy into row-major order
// (attention's context: [b, heads, seq, d] -> [b, seq, heads * d]) writes its result in
// the transposed order: the transpose then reads row-major memory, the reshape becomes a
// view and the copy disappears. oneDNN's matmul writes through any strides.
void write_through_transpose(lower_env& env, anchor_plan& p) {
    auto out = p.chain.members.empty() ? p.anchor : p.chain.members.back();
    if (!p.chain.extra.empty()) return;
    auto dst = transposed_write_shape(out, p.dst.lens());
    if (!dst) return;
    const auto* mm = p.op.any_cast<matmul>();
    if (mm == nullptr || !try_impl(env, *mm, p.shapes, *dst, p.constant_weights)) return;
    p.dst = *dst;
}

std::optional<anchor_plan> plan_matmul(lower_env& env, instruction_ref ins,
                                       const std::unordered_set<const instruction*>& claimed) {
    const bool is_gemm = rewrite::is<op::gemm>(ins);
    if ((!is_gemm && !rewrite::is<op::matmul>(ins)) || !all_f32_static(ins)) return std::nullopt;
    const auto& in = ins->inputs();
    if (in.size() < 2 || in[0]->get_shape().ndim() < 2 || in[1]->get_shape().ndim() < 2) return std::nullopt;
    matmul mm;
    anchor_plan p;
    p.anchor = ins;
    p.dst = ins->get_shape().as_standard();
    p.operands = {in[0], in[1]};
    p.shapes = {in[0]->get_shape(), in[1]->get_shape()};
    const auto& bl = in[1]->get_shape().lens();
    bool batched_b = false;
    for (std::size_t d = 0; d + 2 < bl.size(); ++d) batched_b = batched_b || bl[d] != 1;
    p.constant_weights = in[1]->is_literal() && !batched_b;
    mm.weights_shape = p.constant_weights ? in[1]->get_shape().as_standard() : shape{};
    bool chain_may_take_bias = true;
    if (is_gemm) {
        const auto& g = ins->get_operator().get<op::gemm>();
        mm.trans_a = g.trans_a;
        mm.trans_b = g.trans_b;
        const bool has_c = in.size() == 3 && g.beta != 0.0f;
        auto lin = [](float a) {
            post_op q;
            q.algorithm = "linear";
            q.alpha = a;
            return q;
        };
        if (has_c) {
            // alpha*AB + beta*C, with C pre-scaled by beta when it is a constant (oneDNN
            // takes one linear step at most, see one_linear_at_most).
            if (g.beta != 1.0f && !in[2]->is_literal()) return std::nullopt;
            if (g.alpha != 1.0f) mm.post_ops.push_back(lin(g.alpha));
            const auto& cl = in[2]->get_shape().lens();
            const bool row = in[2]->is_literal() && in[2]->get_shape().elements() == p.dst.lens().back() &&
                             cl.size() <= 2 && cl.back() == p.dst.lens().back() && mm.post_ops.empty();
            if (row) {
                mm.has_bias = true;
                p.operands.push_back(in[2]);
                p.shapes.push_back(shape(type::float32, {cl.back()}));
                p.vector_operands.push_back(2);
            } else {
                post_op add;
                add.kind = "binary";
                add.algorithm = "add";
                add.input = 2;
                mm.post_ops.push_back(add);
                p.operands.push_back(in[2]);
                p.shapes.push_back(in[2]->get_shape());
            }
            if (g.beta != 1.0f) p.scaled_operand = {2, g.beta};
            chain_may_take_bias = false;
        } else if (g.alpha != 1.0f) {
            mm.post_ops.push_back(lin(g.alpha));
            chain_may_take_bias = false;
        }
    }
    auto chain = find_post_ops(ins, p.dst.ndim() - 1, chain_may_take_bias && !mm.has_bias, claimed,
                               own_silu_enabled(env.ctx.options()));
    p.wanted.assign(p.operands.size(), std::nullopt);
    auto plan = finish_plan(env, p, mm, chain, 2, std::nullopt);
    if (plan) write_through_transpose(env, *plan);
    return plan;
}

// Rewrites the plan's last chain member (or the anchor itself) into the kernel the
// selection table picks (selection.hpp).
void materialize(lower_env& env, anchor_plan p, instruction_ref pos) {
    auto& m = env.m;
    for (std::size_t i = 0; i < p.operands.size(); ++i) {
        const bool scaled = p.scaled_operand && p.scaled_operand->first == i;
        const bool vec = std::find(p.vector_operands.begin(), p.vector_operands.end(), i) != p.vector_operands.end();
        if (p.dw_weights_operand == i) continue;  // relaid out by the kernel
        if (vec || scaled) {
            // A constant of one value per channel as the 1-D vector oneDNN wants, or
            // multiplied by gemm's beta.
            auto values = p.operands[i]->get_literal().to_vector<float>();
            if (scaled)
                for (auto& v : values) v *= p.scaled_operand->second;
            p.operands[i] = env.constant(pos, literal(p.shapes[i], values));
        } else if (p.wanted[i]) {
            p.operands[i] = to_layout(env, pos, p.operands[i], p.wanted[i]->to_md());
        } else if (!(i == 1 && p.constant_weights)) {
            p.operands[i] = ensure_layout(env, pos, p.operands[i], p.shapes[i]);
        }
    }
    // The weights as parsed: once the cpu op holds its own copy (reordered, or Winograd-transformed)
    // nothing reads them, and dropping them now rather than at the final dead-code pass keeps the
    // compile's peak memory near one copy of the weights instead of two.
    const bool drop_parsed_weights = p.constant_weights;
    const instruction_ref parsed_weights = p.operands.at(1);
    const auto members = p.chain.members;
    const auto anchor = p.anchor;
    auto replaced = members;  // what the kernel replaces (readers of a residual it may overwrite)
    replaced.push_back(anchor);
    anchor_site site{env, p, pos, replaced};
    if (lower_anchor(site).empty()) return;  // left to the reference kernels, chain and all
    for (auto it = members.rbegin(); it != members.rend(); ++it)
        if (*it != pos && (*it)->outputs().empty()) m.remove_instruction(*it);
    if (anchor != pos && anchor->outputs().empty()) m.remove_instruction(anchor);
    if (drop_parsed_weights && parsed_weights->is_literal() && parsed_weights->outputs().empty()) {
        env.forget_derived(parsed_weights);
        m.remove_instruction(parsed_weights);
    }
}

// Merges each 1x1 convolution plan with the plan of the depthwise convolution that
// alone reads its result, where oneDNN fuses the two (see dw_fusion.hpp).
void fuse_depthwise_pairs(lower_env& env, std::unordered_map<const instruction*, anchor_plan>& at_last) {
    std::unordered_map<const instruction*, const instruction*> last_of_anchor;
    for (const auto& [last, p] : at_last) last_of_anchor.emplace(&*p.anchor, last);
    std::vector<const instruction*> firsts;
    for (const auto& [last, p] : at_last)
        if (rewrite::is<op::convolution>(p.anchor)) firsts.push_back(last);
    for (const auto* first : firsts) {
        auto a = at_last.find(first);
        if (a == at_last.end() || a->second.anchor->outputs().empty()) continue;
        const auto mid = a->second.chain.members.empty() ? a->second.anchor : a->second.chain.members.back();
        if (mid->outputs().size() != 1) continue;
        auto bl = last_of_anchor.find(&*mid->outputs().front());
        if (bl == last_of_anchor.end()) continue;
        auto b = at_last.find(bl->second);
        if (b == at_last.end() || b == a) continue;
        auto fused = fuse_depthwise(env, a->second, b->second);
        if (!fused) continue;
        const auto* key = b->first;
        at_last.erase(a);
        at_last.erase(key);
        at_last.emplace(key, std::move(*fused));
    }
}

// oneDNN fuses a depthwise 3x3 convolution into the 1x1 convolution before it only in its
// jit 1x1 kernels, which take 16-channel blocked layouts, and on AVX-512 machines it picks
// channels-last brgemm kernels for "any". Where the 1x1 result is large (at least
// fuse_min_bytes: MobileNetV2's 96 channels at 112x112, 4.8 MB) the pair and the
// convolutions before it at the same or a larger size are planned blocked, so the pair
// can run as one kernel and the expanded tensor is never written whole.
void blocked_for_depthwise_fusion(lower_env& env) {
    constexpr std::size_t fuse_min_bytes = 4u << 20;
    const auto& o = env.ctx.options();
    if (!has_avx512() || !o.dw_blocked || !o.dw_fusion) return;
    auto is_conv = [](instruction_ref i) { return rewrite::is<op::convolution>(i) && i->get_shape().ndim() == 4; };
    auto is_activation = [](instruction_ref i) { return rewrite::is_any<op::relu_op, op::clip_op>(i); };
    auto skip_activations = [&](instruction_ref i) {
        while (i->outputs().size() == 1 && is_activation(i->outputs().front())) i = i->outputs().front();
        return i;
    };
    for (auto ins = env.m.begin(); ins != env.m.end(); ++ins) {
        if (!is_conv(ins) || ins->inputs().size() < 2) continue;
        const auto& w = ins->inputs()[1]->get_shape().lens();
        const auto& out = ins->get_shape().lens();
        if (w.size() != 4 || w[2] != 1 || w[3] != 1 || out[1] % 16 != 0 || ins->get_shape().bytes() < fuse_min_bytes)
            continue;
        const auto mid = skip_activations(ins);
        if (mid->outputs().size() != 1 || !is_conv(mid->outputs().front())) continue;
        const auto dw = mid->outputs().front();
        const auto& dww = dw->inputs()[1]->get_shape().lens();
        if (dww.size() != 4 || dww[0] != out[1] || dww[1] != 1 || dww[2] != 3 || dww[3] != 3) continue;
        // The pair's 1x1, then back through convolutions (and their activations) of at least
        // its spatial size.
        const auto pixels = out[2] * out[3];
        for (auto c = ins; is_conv(c) && c->get_shape().lens()[2] * c->get_shape().lens()[3] >= pixels;) {
            env.blocked.insert(&*c);
            auto x = c->inputs()[0];
            while (is_activation(x) && !x->inputs().empty()) x = x->inputs()[0];
            if (x->get_shape().ndim() != 4 || x->get_shape().lens()[1] % 16 != 0) break;
            c = x;
        }
    }
}

// A convolution over a range of shapes that cpu::dyn_primitive does not take (run-time
// weights) would run on the reference kernel, orders of magnitude slower
// than a specialization's oneDNN primitive: the cpu target builds no generic program for
// it, and the program is specialized per set of shapes instead.
void refuse_dynamic_convolutions(const module& m) {
    for (auto& ins : m) {
        if (!rewrite::is<op::convolution>(ins) && !rewrite::is<op::deconvolution>(ins)) continue;
        bool dynamic = ins.get_shape().dynamic();
        for (auto in : ins.inputs()) dynamic = dynamic || (in->get_shape().is_tensor() && in->get_shape().dynamic());
        if (dynamic)
            throw_error(error_code::unsupported, "cpu: " + ins.name() + " -> " + ins.get_shape().to_string() +
                                                     " has no kernel for a range of shapes yet");
    }
}

// The anchors in program order, so each elementwise op is fused at most once.
void plan_anchors(lowering_state::per_module& s);
void lower_instructions(lowering_state::per_module& s);
void insert_reorders(lowering_state::per_module& s);

}  // namespace

struct lowering_state::per_module {
    lower_env env;
    std::unordered_set<const instruction*> claimed;            // anchors and their chains' members
    std::unordered_map<const instruction*, anchor_plan> at_last;  // plans by their chain's last member
};

lowering_state::lowering_state() = default;
lowering_state::~lowering_state() = default;

lowering_state::per_module& lowering_state::of(module& m, cpu_context& ctx) {
    auto& s = modules_[&m];
    if (!s) s.reset(new per_module{lower_env{m, ctx, {}, {}, {}, {}, {}, {}}, {}, {}});
    return *s;
}

void lowering_state::release(const module& m) { modules_.erase(&m); }

void lowering_phase::apply(module& m) const {
    if (!ctx || !state) throw_error(error_code::runtime, phase + ": no cpu context");
    omp_threads_scope threads(ctx->threads());
    run(state->of(m, *ctx));
    if (last) state->release(m);
}

namespace {

void plan_anchors(lowering_state::per_module& s) {
    auto& env = s.env;
    for (auto ins = env.m.begin(); ins != env.m.end(); ++ins) {
        if (s.claimed.count(&*ins)) continue;
        auto p = plan_conv(env, ins, s.claimed);
        if (!p) p = plan_matmul(env, ins, s.claimed);
        if (!p) continue;
        s.claimed.insert(&*ins);
        for (auto mem : p->chain.members) s.claimed.insert(&*mem);
        auto last = p->chain.members.empty() ? ins : p->chain.members.back();
        s.at_last.emplace(&*last, std::move(*p));
    }
    if (env.ctx.options().dw_fusion) fuse_depthwise_pairs(env, s.at_last);
}

void lower_instructions(lowering_state::per_module& s) {
    auto& env = s.env;
    auto& m = env.m;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (auto it = s.at_last.find(&*ins); it != s.at_last.end()) {
            materialize(env, std::move(it->second), ins);
            continue;
        }
        if (s.claimed.count(&*ins)) continue;  // lowered with its chain's last member
        lower_op(env, ins);
    }
    s.at_last.clear();
    s.claimed.clear();
    if (env.ctx.options().exhaustive_tune) env.ctx.tuning().save();
    // Users before what they use (tuple elements, then the tuple).
    for (auto d : env.dead)
        if (d->outputs().empty()) m.remove_instruction(d);
    env.dead.clear();
}

void insert_reorders(lowering_state::per_module& s) {
    auto& env = s.env;
    auto& m = env.m;
    // Whatever is not a oneDNN op reads activations in oneDNN layouts through a reorder
    // to row-major (the real layout boundaries).
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (is_cpu_kernel(ins)) continue;
        std::vector<instruction_ref> inputs = ins->inputs();
        std::sort(inputs.begin(), inputs.end(), [](auto a, auto b) { return &*a < &*b; });
        inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
        for (auto in : inputs)
            if (in_dnnl_layout(env, in)) m.replace_argument(ins, in, plain(env, in));
    }
    // Program outputs leave in row-major layout.
    auto ret = m.get_return();
    if (ret == m.end()) return;
    for (auto out : std::vector<instruction_ref>(ret->inputs())) {
        const auto& sh = out->get_shape();
        if (!sh.is_tensor() || sh.dynamic() || sh.standard() || sh.elements() == 0) continue;
        if (!dnnl_type_supported(sh.get_type())) continue;
        m.replace_argument(ret, out, ensure_layout(env, ret, out, sh.as_standard()));
    }
}

}  // namespace

std::vector<pass> lowering_passes(cpu_context& ctx) {
    auto state = std::make_shared<lowering_state>();
    using phase_fn = void (*)(lowering_state::per_module&);
    const std::pair<const char*, phase_fn> phases[] = {
        {"cpu::lower_dynamic",
         [](lowering_state::per_module& s) {
             lower_dyn_primitives(s.env);
             refuse_dynamic_convolutions(s.env.m);
         }},
        {"cpu::fold_layer_norm", [](lowering_state::per_module& s) { fold_layer_norm_patterns(s.env.m); }},
        {"cpu::fuse_attention", [](lowering_state::per_module& s) { fuse_attention(s.env); }},
        {"cpu::plan_layouts", [](lowering_state::per_module& s) { blocked_for_depthwise_fusion(s.env); }},
        {"cpu::plan_anchors", plan_anchors},
        {"cpu::lower_instructions", lower_instructions},
        {"cpu::insert_reorders", insert_reorders},
    };
    std::vector<pass> passes;
    for (std::size_t i = 0; i < std::size(phases); ++i) {
        // The last phase releases the module's state (its maps of instructions and constants).
        const bool last = i + 1 == std::size(phases);
        passes.push_back(lowering_phase{phases[i].first, phases[i].second, &ctx, state, last});
    }
    return passes;
}

}  // namespace kiln::cpu
