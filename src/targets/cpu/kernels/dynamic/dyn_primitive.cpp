#include "targets/cpu/kernels/dynamic/dyn_primitive.hpp"

#include "targets/cpu/kernels/onednn/op_conv.hpp"
#include "targets/cpu/kernels/onednn/op_misc.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/reduce.hpp"
#include "ops/tensor_views.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace kiln::cpu {

namespace {

// A convolution or a transposed one (cpu::convolution builds either from the op).
bool is_conv(const operation& op) {
    return op.any_cast<op::convolution>() != nullptr || op.any_cast<op::deconvolution>() != nullptr;
}

// The shapes that decide a primitive: every operand's dims and strides, and the weights'
// address (copies of the op in programs with other weights share the cache).
std::string key_of(const std::vector<argument>& args, bool conv) {
    std::string k;
    for (const auto& a : args) append_shape_key(k, a.get_shape());
    if (conv) k += std::to_string(reinterpret_cast<std::uintptr_t>(args.at(1).data()));
    return k;
}

std::string weights_part(const std::string& key) { return key.substr(key.rfind(';')); }

shape channels_last(const shape& s) { return shape(s.get_type(), s.lens(), channels_last_strides(s.lens())); }

// A scratchpad per thread, grown as needed (64-byte aligned, as oneDNN's own).
void* scratchpad(std::size_t bytes) {
    struct buffer {
        void* p = nullptr;
        std::size_t size = 0;
        ~buffer() { std::free(p); }
    };
    thread_local buffer b;
    if (bytes > b.size) {
        std::free(b.p);
        b.size = (bytes + 63) / 64 * 64;
        b.p = std::aligned_alloc(64, b.size);
        if (!b.p) {
            b.size = 0;
            throw_error(error_code::out_of_memory, "cpu::dyn_primitive: no memory for a " + std::to_string(bytes) +
                                                       "-byte scratchpad");
        }
    }
    return b.p;
}

// oneDNN's primitive for operands `wanted` (x and post inputs channels-last) and the
// result `result`; nothing when oneDNN has none for this shape.
std::optional<dnnl::primitive_desc_base> make_pd(const dyn_primitive& d, const dnnl::engine& eng,
                                                 const std::vector<shape>& wanted, const shape& result) {
    try {
        if (is_conv(d.op)) {
            convolution c;
            c.op = d.op;
            c.weights_shape = wanted.at(1);
            c.has_bias = d.has_bias;
            c.post_ops = d.post_ops;
            return c.make_pd(eng, wanted, result, true);
        }
        pooling p;
        p.op = d.op;
        return p.make_pd(eng, wanted, result);
    } catch (const dnnl::error&) {
        return std::nullopt;
    } catch (const error& e) {
        if (e.code() == error_code::unsupported) return std::nullopt;
        throw;
    }
}

}  // namespace

std::size_t dyn_primitive::ir_operands() const { return is_conv(op) ? (has_bias ? 3 : 2) : 1; }

shape dyn_primitive::compute_shape(const std::vector<shape>& inputs) const {
    const std::size_t ir = ir_operands();
    if (inputs.size() < ir)
        throw_error(error_code::shape, name() + "(" + op.name() + "): expected " + std::to_string(ir) +
                                           " operands or more, got " + std::to_string(inputs.size()));
    return op.compute_shape(std::vector<shape>(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(ir)));
}

std::size_t dyn_primitive::cached_shapes() const {
    return cache->size();
}

argument dyn_primitive::compute(context& ctx, const shape& out, const std::vector<argument>& args) const {
    auto& c = as_cpu_context(ctx, name());
    std::vector<shape> shapes;
    shapes.reserve(args.size());
    for (const auto& a : args) shapes.push_back(a.get_shape());
    const shape logical = out.dynamic() ? compute_shape(shapes) : out.as_standard();
    for (const auto& p : post_ops)
        if (p.kind == "binary" &&
            (p.input < 0 || static_cast<std::size_t>(p.input) >= args.size() || shapes[p.input].lens() != logical.lens()))
            throw_error(error_code::shape, name() + ": post-op input " + std::to_string(p.input) +
                                               " does not have the result's dims " + logical.to_string());
    if (logical.elements() == 0) return argument(logical);
    const bool conv = is_conv(op);

    const std::string key = key_of(args, conv);
    auto e = cache->find(key);
    if (!e) {
        // A new shape: its primitive, made outside the lock (two threads that meet the same
        // new shape both make one; one is kept).
        omp_threads_scope threads(c.threads());
        auto made = std::make_shared<dyn_primitive_entry>();
        made->key = key;
        auto wanted = shapes;
        std::vector<std::size_t> moved{0};  // operands read in channels-last order
        for (const auto& p : post_ops)
            if (p.kind == "binary") moved.push_back(static_cast<std::size_t>(p.input));
        for (auto i : moved) wanted[i] = channels_last(shapes[i]);
        if (auto pd = make_pd(*this, c.engine(), wanted, channels_last(logical))) {
            for (auto i : moved) {
                made->given.push_back(md_of(shapes[i]));
                made->to_channels_last.emplace_back();
                if (!(wanted[i] == shapes[i]))
                    made->to_channels_last.back() = dnnl::reorder(
                        dnnl::reorder::primitive_desc(c.engine(), md_of(shapes[i]), c.engine(), md_of(wanted[i])));
            }
            made->prim = dnnl::primitive(pd->get());
            made->src = pd->src_desc();
            made->dst = pd->dst_desc();
            made->scratch = pd->scratchpad_desc().get_size();
            for (const auto& p : post_ops)
                if (p.kind == "binary") made->post_inputs.push_back(md_of(wanted[p.input]));
            if (conv) {
                if (has_bias) made->bias = md_of(shapes[2]);
                made->weights = pd->weights_desc();
                convolution plain;
                plain.op = op;
                plain.weights_shape = shapes[1];
                const auto plain_w = plain.weights_md(false);
                if (made->weights != plain_w) {
                    // Reordered once per layout, shared by the shapes that want it.
                    cache->for_each([&](const dyn_primitive_entry& other) {
                        if (other.weights == made->weights && weights_part(other.key) == weights_part(key))
                            made->reordered_weights = other.reordered_weights;
                    });
                    if (!made->reordered_weights)
                        made->reordered_weights = reorder_constant(c.engine(), plain_w, args[1].data(), made->weights);
                }
            }
        } else if (!post_ops.empty()) {
            throw_error(error_code::unsupported, name() + ": oneDNN has no " + op.name() + " with post-ops for " +
                                                     shapes[0].to_string());
        }
        e = made;
        cache->add(e, max_cached);
    }
    if (!e->prim) {
        // The reference kernel (a pooling geometry oneDNN does not have, e.g. ceil_mode
        // with count_include_pad).
        return op.compute(ctx, logical,
                          std::vector<argument>(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(ir_operands())));
    }

    const shape result = channels_last(logical);
    argument y(result);
    auto& eng = c.engine();
    auto& stream = c.stream();
    // Operands in another order than channels-last go through buffers of their own.
    std::vector<argument> moved_args;
    moved_args.reserve(e->given.size());
    auto operand = [&](std::size_t k, std::size_t input, const dnnl::memory::desc& want) {
        void* data = args[input].data();
        if (!e->to_channels_last[k]) return dnnl::memory(want, eng, data);
        moved_args.emplace_back(channels_last(shapes[input]));
        dnnl::memory from(e->given[k], eng, data), to(want, eng, moved_args.back().data());
        e->to_channels_last[k]->execute(stream, from, to);
        return to;
    };
    std::unordered_map<int, dnnl::memory> m;
    m.emplace(DNNL_ARG_SRC, operand(0, 0, e->src));
    if (conv) {
        m.emplace(DNNL_ARG_WEIGHTS,
                  e->reordered_weights ? e->reordered_weights : dnnl::memory(e->weights, eng, args[1].data()));
        if (has_bias) m.emplace(DNNL_ARG_BIAS, dnnl::memory(e->bias, eng, args[2].data()));
    }
    m.emplace(DNNL_ARG_DST, dnnl::memory(e->dst, eng, y.data()));
    for (std::size_t i = 0, b = 0; i < post_ops.size(); ++i)
        if (post_ops[i].kind == "binary") {
            m.emplace(binary_post_op_arg(i),
                      operand(b + 1, static_cast<std::size_t>(post_ops[i].input), e->post_inputs[b]));
            ++b;
        }
    if (e->scratch > 0)
        m.emplace(DNNL_ARG_SCRATCHPAD,
                  dnnl::memory(dnnl::memory::desc({static_cast<dnnl::memory::dim>(e->scratch)},
                                                  dnnl::memory::data_type::u8, dnnl::memory::format_tag::a),
                               eng, scratchpad(e->scratch)));
    try {
        e->prim->execute(stream, m);
    } catch (const dnnl::error& err) {
        throw_error(error_code::runtime, name() + "(" + op.name() + "): oneDNN failed on " + shapes[0].to_string() +
                                             ": " + err.what());
    }
    return y;
}

namespace {

// A typed matcher: whether ins runs the IR op Op.
template <class Op>
bool is(instruction_ref ins) {
    return ins->get_operator().any_cast<Op>() != nullptr;
}

bool f32_constant(instruction_ref x) { return x->is_literal() && f32_tensor(x) && !x->get_shape().dynamic(); }

bool dynamic(instruction_ref ins) {
    bool d = ins->get_shape().dynamic();
    for (auto in : ins->inputs()) d = d || (in->get_shape().is_tensor() && in->get_shape().dynamic());
    return d;
}

// When x's only readers are sigmoid(x) and x * sigmoid(x) (SiLU, as exporters write it):
// the sigmoid and the product.
std::optional<std::pair<instruction_ref, instruction_ref>> silu_of(instruction_ref x) {
    if (x->outputs().size() != 2) return std::nullopt;
    auto sig = x->outputs()[0], mul = x->outputs()[1];
    if (!is<op::sigmoid_op>(sig)) std::swap(sig, mul);
    if (!is<op::sigmoid_op>(sig) || !is<op::mul_op>(mul) || sig->outputs().size() != 1 ||
        sig->outputs().front() != mul || mul->inputs().size() != 2 || !f32_tensor(mul))
        return std::nullopt;
    const auto& in = mul->inputs();
    if (!((in[0] == x && in[1] == sig) || (in[0] == sig && in[1] == x))) return std::nullopt;
    return std::make_pair(sig, mul);
}

// A mean over every spatial axis of [N, C, ...] (mnasnet's and shufflenet's x.mean([2, 3])):
// a global average pooling. The generated kernels cannot walk a channels-last input's
// spatial axes as a row, so it ran the reference kernel (15% of mnasnet1_0's generic call).
bool global_mean(instruction_ref ins) {
    const auto* r = ins->get_operator().any_cast<op::reduce_mean>();
    if (!r || ins->inputs().size() != 1 || !f32_tensor(ins->inputs()[0])) return false;
    const auto rank = static_cast<std::int64_t>(ins->inputs()[0]->get_shape().ndim());
    if (rank < 3 || static_cast<std::int64_t>(r->axes.size()) != rank - 2) return false;
    std::vector<std::int64_t> axes;
    for (auto a : r->axes) axes.push_back(a < 0 ? a + rank : a);
    std::sort(axes.begin(), axes.end());
    for (std::int64_t i = 0; i < rank - 2; ++i)
        if (axes[static_cast<std::size_t>(i)] != i + 2) return false;
    return true;
}

// The instructions this lowering takes, with the op to run.
std::optional<dyn_primitive> candidate(instruction_ref ins) {
    if (!f32_tensor(ins) || !dynamic(ins)) return std::nullopt;
    const auto& in = ins->inputs();
    dyn_primitive d;
    d.op = ins->get_operator();
    if (is<op::convolution>(ins) || is<op::deconvolution>(ins)) {
        // Run-time weights stay: the program is specialized per shape instead.
        if (in.size() < 2 || in.size() > 3 || !f32_tensor(in[0]) || !f32_constant(in[1]) ||
            (in.size() == 3 && !f32_constant(in[2])))
            return std::nullopt;
        d.has_bias = in.size() == 3;
        return d;
    }
    if (is<op::pooling>(ins)) {
        const auto* p = d.op.any_cast<op::pooling>();
        if (!p || p->mode == op::pooling_mode::lp || in.size() != 1 || !f32_tensor(in[0]) ||
            in[0]->get_shape().ndim() < 3)
            return std::nullopt;
        return d;
    }
    if (global_mean(ins)) {
        op::pooling p;
        p.mode = op::pooling_mode::average;
        p.global = true;
        d.op = p;
        return d;
    }
    return std::nullopt;
}

}  // namespace

namespace {

// A candidate with the activations (SiLU too) and residual add after it that it takes as
// post-ops, each read only by the next: the op, its arguments and the chain (ins first).
struct planned_chain {
    dyn_primitive op;
    std::vector<instruction_ref> args, chain;
};

std::optional<planned_chain> plan_chain(instruction_ref ins) {
    auto op = candidate(ins);
    if (!op) return std::nullopt;
    planned_chain c{*op, std::vector<instruction_ref>(ins->inputs().begin(), ins->inputs().end()), {ins}};
    for (auto cur = ins; is_conv(c.op.op);) {
        if (auto silu = silu_of(cur)) {  // x * sigmoid(x), the one pair that reads x twice
            post_op p;
            p.algorithm = "swish";
            p.alpha = 1.0f;
            c.op.post_ops.push_back(p);
            c.chain.push_back(silu->first);
            c.chain.push_back(silu->second);
            cur = silu->second;
            continue;
        }
        if (cur->outputs().size() != 1) break;
        auto next = cur->outputs().front();
        if (auto e = eltwise_post_ops(next, true); e && next->inputs().front() == cur) {
            c.op.post_ops.insert(c.op.post_ops.end(), e->begin(), e->end());
        } else if (is<op::add_op>(next) && next->inputs().size() == 2 && f32_tensor(next)) {
            auto other = next->inputs()[0] == cur ? next->inputs()[1] : next->inputs()[0];
            // The same dims as the result (the same symbols): no broadcasting.
            if (other == cur || !(other->get_shape() == cur->get_shape())) break;
            post_op p;
            p.kind = "binary";
            p.algorithm = "add";
            p.input = static_cast<std::int64_t>(c.args.size());
            c.op.post_ops.push_back(p);
            c.args.push_back(other);
        } else {
            break;
        }
        c.chain.push_back(next);
        cur = next;
    }
    return c;
}

}  // namespace

std::vector<instruction_ref> dyn_primitive_post_ops(instruction_ref ins) {
    auto c = plan_chain(ins);
    if (!c) return {};
    return std::vector<instruction_ref>(c->chain.begin() + 1, c->chain.end());
}

void lower_dyn_primitives(lower_env& env) {
    std::vector<instruction_ref> found;
    for (auto ins = env.m.begin(); ins != env.m.end(); ++ins)
        if (candidate(ins)) found.push_back(ins);
    for (auto ins : found) {
        auto c = *plan_chain(ins);
        if (global_mean(ins) && !ins->get_operator().get<op::reduce_mean>().keepdims) {
            // [N, C, 1, ...] without its ones.
            auto pooled = env.m.insert_instruction(ins, c.op, c.args);
            env.m.replace_instruction(ins, op::reshape{{0, -1}}, {pooled});
            continue;
        }
        env.m.replace_instruction(c.chain.back(), c.op, c.args);
        for (auto it = c.chain.rbegin() + 1; it != c.chain.rend(); ++it)
            if ((*it)->outputs().empty()) env.m.remove_instruction(*it);
    }
}

KILN_REGISTER_OP(dyn_primitive)

}  // namespace kiln::cpu
