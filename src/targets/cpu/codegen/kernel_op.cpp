#include "targets/cpu/codegen/kernel_op.hpp"

#include "targets/cpu/codegen/interpreter.hpp"
#include "targets/cpu/codegen/isa.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/kernels/dynamic/memory_order.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <array>
#include <exception>
#include <optional>

namespace kiln::cpu {

struct fused_kernel::runtime {
    codegen::plan plan;
    bool has_plan = false;
    kernel_fn fn = nullptr;
    generic_kernel_fn generic_fn = nullptr;
    type result_type = type::float32;  // a generic kernel's
    std::shared_ptr<codegen::library> lib;
    std::size_t threads = 1;
};

namespace {

// The walk order of a generic kernel's domain (empty: the dims as they are).
std::vector<std::size_t> walk_order(const codegen::generic_layout& l, std::size_t rank) {
    std::vector<std::size_t> order(rank);
    for (std::size_t i = 0; i < rank; ++i) order[i] = l.order.empty() ? i : static_cast<std::size_t>(l.order[i]);
    return order;
}

// Whether a view of the domain's rank is worth copying into the walk order: it reads no
// dim as a broadcast (stride 0) and is not already stored in that order (dims of length 1
// may carry any stride).
bool copy_into_walk(const shape& s, const std::vector<std::size_t>& order) {
    if (!s.is_tensor() || s.ndim() != order.size() || s.elements() <= 1) return false;
    for (std::size_t d = 0; d < s.ndim(); ++d)
        if (s.lens()[d] > 1 && s.strides()[d] == 0) return false;
    return !stored_in(s, order);
}

argument copied_into_walk(const argument& a, const std::vector<std::size_t>& order) {
    const auto& s = a.get_shape();
    auto out = argument::for_overwrite(shape(s.get_type(), s.lens(), strides_in(s.lens(), order)));
    a.copy_to(out);
    return out;
}

// Below this many elements touched, a kernel runs on the calling thread: waking the
// team costs more than it saves.
constexpr std::size_t parallel_elements = 1u << 15;

const std::string& bytes_of(const value& v) {
    static const std::string none;
    return v.is_binary() ? v.get_binary().bytes : none;
}

// The first kernel of a module brings its library in (see the header for the order).
std::shared_ptr<codegen::library> load_library(const fused_kernel& k, const cpu_options& o) {
    using namespace codegen;
    const auto& object = bytes_of(k.object);
    const auto& source = bytes_of(k.source);
    const std::string target = target_isa(o);
    std::shared_ptr<library> lib;
    if (!object.empty() && k.object_isa == target) lib = load_object(k.library, k.object_isa, object, o);
    if (!lib && !source.empty()) lib = build_library(source, target, k.fast_math, o).lib;
    if (!lib && !object.empty()) lib = load_object(k.library, k.object_isa, object, o);
    return lib;
}

// The arguments' data pointers (the output buffer left out when `n` says so), without
// allocating for up to 16 of them.
struct arg_pointers {
    std::array<const void*, 16> small{};
    std::vector<const void*> large;
    const void** data = small.data();
    arg_pointers(const arg_pointers&) = delete;
    arg_pointers& operator=(const arg_pointers&) = delete;
    arg_pointers(const std::vector<argument>& args, std::size_t n) {
        if (n > small.size()) {
            large.resize(n);
            data = large.data();
        }
        for (std::size_t i = 0; i < n; ++i) data[i] = args[i].data();
    }
};

// Runs work units [0, work) as contiguous chunks, one per thread (element ranges rounded
// to 16 so that vector loops start aligned); small work on the calling thread alone.
template <class Run>
void run_in_chunks(std::size_t work, std::size_t touched, bool rows, std::size_t max_threads, Run run) {
    const std::size_t threads = std::min(max_threads, work);
    if (threads <= 1 || touched < parallel_elements) {
        if (work > 0) run(0, work);
        return;
    }
    const std::size_t align = rows ? 1 : 16;
    std::exception_ptr failure;
#pragma omp parallel num_threads(static_cast<int>(threads))
    {
        const auto t = static_cast<std::size_t>(omp_get_thread_num());
        const auto nt = static_cast<std::size_t>(omp_get_num_threads());
        auto bound = [&](std::size_t i) { return i == nt ? work : std::min(work, (work * i / nt) / align * align); };
        try {
            const auto b = bound(t), e = bound(t + 1);
            if (b < e) run(b, e);
        } catch (...) {
#pragma omp critical
            failure = std::current_exception();
        }
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace

shape fused_kernel::compute_shape(const std::vector<shape>& inputs) const {
    if (!generic.empty()) {
        // A run's shapes (every call of a generic program asks): from the layout, without the
        // body's shape inference (a small call's whole cost). The broadcast of the arguments
        // whether or not they fit the layout; compute checks that they do.
        if (rt && rt->generic_fn &&
            std::none_of(inputs.begin(), inputs.end(), [](const shape& s) { return !s.is_tensor() || s.dynamic(); }))
            return codegen::generic_result_shape(generic, inputs, rt->result_type);
        return body.compute_shape(inputs);
    }
    if (inputs.empty()) throw_error(error_code::shape, "cpu::fused_kernel: missing its output buffer");
    std::vector<shape> in(inputs.begin(), inputs.end() - 1);
    auto s = body.compute_shape(in);
    if (!s.same_lens_and_type(inputs.back()))
        throw_error(error_code::shape, "cpu::fused_kernel: result " + s.to_string() + " does not fit its buffer " +
                                           inputs.back().to_string());
    return inputs.back();
}

void fused_kernel::finalize(context& ctx, const shape& output, const std::vector<shape>& inputs) {
    auto r = std::make_shared<runtime>();
    auto* c = dynamic_cast<cpu_context*>(&ctx);
    if (c) r->threads = std::max<std::size_t>(1, c->threads());
    if (!generic.empty()) {
        r->result_type = output.get_type();
        // The plan is made per call (interpreter) or not needed (the generic kernel).
        r->has_plan = generic.group_of.size() == output.ndim() && generic.inputs() == inputs.size();
    } else {
        std::vector<shape> in(inputs.begin(), inputs.end() - (inputs.empty() ? 0 : 1));
        try {
            r->plan = codegen::make_plan(body, in, output, fast_math);
            r->has_plan = true;
        } catch (const error&) {
            r->has_plan = false;  // a group no kernel handles (e.g. a hand-edited file): reference compute
        }
    }
    if (r->has_plan && !symbol.empty()) {
        r->lib = lib;
        if (!r->lib && (!bytes_of(object).empty() || !bytes_of(source).empty())) {
            // Outside a cpu context (a kernel run by another target), the environment as
            // it is now, as a cpu context made here would read it.
            r->lib = load_library(*this, c ? c->options() : read_cpu_options(compile_options{}));
            if (r->lib) codegen::register_library(library, r->lib);
        }
        if (!r->lib) r->lib = codegen::find_library(library);
        if (r->lib && generic.empty()) r->fn = reinterpret_cast<kernel_fn>(r->lib->symbol(symbol));
        if (r->lib && !generic.empty()) r->generic_fn = reinterpret_cast<generic_kernel_fn>(r->lib->symbol(symbol));
    }
    if (r->has_plan && !r->fn && !r->generic_fn) ++codegen::stats().interpreted;
    lib = nullptr;  // the runtime holds it now
    rt = r;
}

// A generic program's call: the result's shape from the arguments', the kernel over the
// geometry they give, or the interpreter over a plan for them, or (arguments that do not
// fit the layout) the reference computation.
argument fused_kernel::compute_generic(context& ctx, const shape& output, const std::vector<argument>& args) const {
    thread_local std::vector<shape> in;
    in.clear();
    for (const auto& a : args) in.push_back(a.get_shape());
    thread_local std::vector<long> geometry;
    const shape out = output.dynamic() ? compute_shape(in) : output;
    bool fits = rt && rt->generic_fn && codegen::generic_geometry(generic, in, out, geometry);
    // Views whose strides do not merge with the walk (a slice of a transposed tensor, as
    // Swin's q, k and v) are copied into the walk order, and the kernel runs: one pass
    // over them, where the interpreter took several times the kernel's time.
    std::vector<argument> packed;
    if (!fits && rt && rt->generic_fn) {
        const auto order = walk_order(generic, out.ndim());
        std::vector<shape> packed_in = in;
        for (std::size_t i = 0; i < args.size(); ++i) {
            if (!copy_into_walk(in[i], order)) continue;
            if (packed.empty()) packed = args;
            packed[i] = copied_into_walk(args[i], order);
            packed_in[i] = packed[i].get_shape();
        }
        fits = !packed.empty() && codegen::generic_geometry(generic, packed_in, out, geometry);
        if (fits) ++codegen::stats().generic_packed;
    }
    const auto& operands = fits && !packed.empty() ? packed : args;
    std::optional<codegen::plan> p;
    if (!fits) {
        if (rt && rt->generic_fn) ++codegen::stats().generic_misfits;
        if (!rt || !rt->has_plan || out.dynamic()) return body.compute(ctx, out, args);
        try {
            p = codegen::make_plan(body, in, out, fast_math);
        } catch (const error&) {
            return body.compute(ctx, out, args);
        }
    }
    const auto& r = *rt;
    auto y = argument::for_overwrite(out);  // the kernel writes every element
    const arg_pointers ptrs(operands, operands.size());
    void* dst = y.data();
    const long* geo = geometry.data();  // the calling thread's: the team reads it too
    // Work units: elements, or rows of a reduction group (its inner loop g[0] long).
    const bool rows = p ? p->reduction : generic.reduced > 0;
    std::size_t work = p ? p->work() : out.elements(), touched = work;
    if (p) {
        touched = work * p->inner_size();
    } else if (rows) {
        work = 1;
        for (std::size_t k = 1; k < static_cast<std::size_t>(generic.groups); ++k) work *= static_cast<std::size_t>(geometry[k]);
        touched = work * static_cast<std::size_t>(geometry[0]);
    }
    run_in_chunks(work, touched, rows, r.threads, [&](std::size_t b, std::size_t e) {
        if (p) codegen::interpret(*p, ptrs.data, dst, b, e);
        else r.generic_fn(ptrs.data, dst, static_cast<long>(b), static_cast<long>(e), geo);
    });
    return y;
}

argument fused_kernel::compute(context& ctx, const shape& output, const std::vector<argument>& args) const {
    if (!generic.empty()) return compute_generic(ctx, output, args);
    const auto& dest = args.back();
    if (!rt || !rt->has_plan) {
        std::vector<argument> in(args.begin(), args.end() - 1);
        body.compute(ctx, output, in).copy_to(dest);
        return dest;
    }
    const auto& r = *rt;
    const arg_pointers in(args, args.size() - 1);
    const void* const* ptrs = in.data;
    void* out = dest.data();
    const auto& p = r.plan;
    const std::size_t work = p.work();
    auto run = [&](std::size_t b, std::size_t e) {
        if (b >= e) return;
        if (r.fn) r.fn(ptrs, out, static_cast<long>(b), static_cast<long>(e));
        else codegen::interpret(p, ptrs, out, b, e);
    };
    run_in_chunks(work, work * p.inner_size(), p.reduction, r.threads, run);
    return dest;
}

std::string kernel_mode(const operation& op) {
    const auto* k = op.any_cast<fused_kernel>();
    if (!k || !k->rt) return "";
    if (!k->rt->has_plan) return "reference";
    return k->rt->fn || k->rt->generic_fn ? "compiled" : "interpreted";
}

KILN_REGISTER_OP(fused_kernel)

}  // namespace kiln::cpu
