// `operation` is a value type that erases any op struct. An op struct provides
//
//   std::string name() const;                                       required
//   static void reflect(Self&, F);                                  its attributes, once
//   shape compute_shape(const std::vector<shape>&) const;           validate + infer
//   argument compute(const shape&, const std::vector<argument>&) const;   reference semantics
//
// and optionally: a compute taking a `context&` first (target kernels), a compute and
// compute_shape taking sub-modules (control flow), a compute_shape taking the values of
// inputs known at compile time (ops shaped by an input's values), `output_alias` (views),
// `traits()`, and `finalize` (build kernels once at compile time).
#pragma once
#include <kiln/argument.hpp>
#include <kiln/reflect.hpp>
#include <kiln/shape.hpp>
#include <kiln/value.hpp>

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <vector>

namespace kiln {

class module;
using module_ref = module*;
class context;

using param_map = std::unordered_map<std::string, argument>;
// Runs a sub-module with the given parameters and returns its results.
using run_module_fn = std::function<std::vector<argument>(module_ref, const param_map&)>;

// Properties passes ask about, rather than keeping lists of op names: each op's
// traits() declares its own, so a list of the ops with a property exists only there.
struct op_traits {
    bool pointwise = false;       // elementwise over (broadcast) inputs of one shape
    bool commutative = false;     // binary op whose inputs may be swapped
    bool nondeterministic = false;  // random: never folded or merged by CSE
    bool side_effects = false;    // never removed by dead-code elimination
    bool handles_dynamic = false; // compute_shape understands dynamic input shapes itself
    bool builtin = false;         // @param, @literal, @return and other structural ops
    // One input (in its static form); the result is the input's elements in the same
    // row-major order under other lens: reshape, flatten, squeeze, unsqueeze.
    bool reshape_like = false;
    // Reduces input 0 over the axes of its `axes` attribute, keeping them as 1s when its
    // `keepdims` attribute is true: the reduce_* family.
    bool reduction = false;
    // Axis 0 of input 0 and of the result is a batch: image b of the result is computed
    // from image b of input 0 alone, any other inputs are weights read whole by every
    // image (convolution, pooling). split_batch may run such an op image by image.
    bool batch_separable = false;
};

namespace detail {
template <class T> concept op_struct = requires(const T& op) {
    { op.name() } -> std::convertible_to<std::string>;
};
template <class T> concept has_compute_shape = requires(const T& op, const std::vector<shape>& s) {
    { op.compute_shape(s) } -> std::convertible_to<shape>;
};
template <class T> concept has_compute_shape_mods =
    requires(const T& op, const std::vector<shape>& s, const std::vector<module_ref>& m) {
        { op.compute_shape(s, m) } -> std::convertible_to<shape>;
    };
template <class T> concept has_compute = requires(const T& op, const shape& s, const std::vector<argument>& a) {
    { op.compute(s, a) } -> std::convertible_to<argument>;
};
template <class T> concept has_compute_ctx =
    requires(const T& op, context& c, const shape& s, const std::vector<argument>& a) {
        { op.compute(c, s, a) } -> std::convertible_to<argument>;
    };
template <class T> concept has_compute_mods =
    requires(const T& op, const shape& s, const std::vector<argument>& a, const std::vector<module_ref>& m,
             const run_module_fn& r) {
        { op.compute(s, a, m, r) } -> std::convertible_to<argument>;
    };
// What kernel a finalized target op runs (implementation, ISA, precision), for profiles.
template <class T> concept has_kernel_info = requires(const T& op) {
    { op.kernel_info() } -> std::convertible_to<std::string>;
};
template <class T> concept has_isa = requires(const T& op) {
    { op.isa() } -> std::convertible_to<std::string>;
};
template <class T> concept has_output_alias = requires(const T& op, const std::vector<shape>& s) {
    { op.output_alias(s) } -> std::convertible_to<std::ptrdiff_t>;
};
template <class T> concept has_traits = requires(const T& op) {
    { op.traits() } -> std::convertible_to<op_traits>;
};
template <class T> concept has_finalize =
    requires(T& op, context& c, const shape& s, const std::vector<shape>& in) { op.finalize(c, s, in); };
// finalize that also sees the values of constant inputs (empty arguments for the others):
// a kernel whose weights were laid out for one CPU relays them out at load on another.
template <class T> concept has_finalize_constants =
    requires(T& op, context& c, const shape& s, const std::vector<shape>& in, const std::vector<argument>& k) {
        op.finalize(c, s, in, k);
    };
// compute_shape that also sees the values of inputs known at compile time (literals, or
// shape arithmetic over named dims, nullopt for the others): an op whose result's shape
// comes from an input's values (Reshape to a computed shape) gives that shape.
template <class T> concept has_compute_shape_values =
    requires(const T& op, const std::vector<shape>& s, const std::vector<std::optional<argument>>& v) {
        { op.compute_shape(s, v) } -> std::convertible_to<shape>;
    };
}  // namespace detail

class operation {
public:
    operation();  // the null op (name "@null")
    template <class T>
        requires(!std::is_same_v<std::decay_t<T>, operation> && detail::op_struct<T>)
    operation(T op);  // NOLINT: implicit by design, ops are values

    std::string name() const { return self_->name(); }
    op_traits traits() const { return self_->traits(); }

    // Validates inputs and infers the output shape. Dynamic input dimensions are
    // handled generically unless the op says it handles them (traits().handles_dynamic).
    shape compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods = {}) const;
    // The op's own shape function alone, for the concrete shapes of arguments as a program
    // runs: no values, no sampling of dynamic dims (a dynamic result is the op's to size).
    shape compute_run_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods = {}) const;
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args,
                     const std::vector<module_ref>& mods = {}, const run_module_fn& run = {}) const;
    bool has_compute() const { return self_->has_compute(); }
    // Index of the input whose memory the output aliases (views, in-place kernels), or -1.
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const { return self_->output_alias(inputs); }
    // The kernel a finalized target op runs (e.g. "brg:avx512_core_vnni u8 x s8 -> u8"; an
    // own kernel's ISA), or "" (profiles print it: kiln perf --per-instruction).
    std::string kernel_info() const { return self_->kernel_info(); }
    // Builds kernels once at compile time (target ops); a no-op for most ops.
    // `constants` holds, per input, the value of a literal input (empty for others).
    void finalize(context& ctx, const shape& output, const std::vector<shape>& inputs,
                  const std::vector<argument>& constants = {}) {
        ensure_unique();
        self_->finalize(ctx, output, inputs, constants);
    }

    value to_value() const { return self_->to_value(); }
    // A copy with attributes read from `v` (missing keys keep their defaults).
    operation with_value(const value& v) const;

    template <class T>
    const T* any_cast() const {
        return self_->type() == typeid(T) ? static_cast<const T*>(self_->ptr()) : nullptr;
    }
    template <class T>
    const T& get() const;

    std::string to_string() const;  // name{attr=value, ...}
    std::size_t hash() const;
    friend bool operator==(const operation& a, const operation& b);
    friend bool operator!=(const operation& a, const operation& b) { return !(a == b); }

    struct concept_t {
        virtual ~concept_t() = default;
        virtual std::shared_ptr<concept_t> clone() const = 0;
        virtual std::string name() const = 0;
        virtual op_traits traits() const = 0;
        virtual shape compute_shape(const std::vector<shape>&, const std::vector<module_ref>&) const = 0;
        virtual std::optional<shape> compute_shape_values(const std::vector<shape>&,
                                                          const std::vector<std::optional<argument>>&) const = 0;
        virtual bool has_compute_shape_values() const = 0;
        virtual bool has_compute() const = 0;
        virtual argument compute(context&, const shape&, const std::vector<argument>&,
                                 const std::vector<module_ref>&, const run_module_fn&) const = 0;
        virtual std::ptrdiff_t output_alias(const std::vector<shape>&) const = 0;
        virtual std::string kernel_info() const = 0;
        virtual void finalize(context&, const shape&, const std::vector<shape>&, const std::vector<argument>&) = 0;
        virtual value to_value() const = 0;
        virtual void from_value(const value&) = 0;
        virtual const std::type_info& type() const = 0;
        virtual const void* ptr() const = 0;
    };

private:
    template <class T>
    struct model;
    void ensure_unique();
    shape compute_shape_dynamic(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const;
    shape with_computed_values(const shape& r, const std::vector<shape>& inputs,
                               const std::vector<module_ref>& mods) const;
    std::shared_ptr<concept_t> self_;
};

std::ostream& operator<<(std::ostream& os, const operation& op);

[[noreturn]] void throw_no_compute(const std::string& op_name);
[[noreturn]] void throw_bad_op_cast(const std::string& op_name, const char* wanted);

template <class T>
struct operation::model final : operation::concept_t {
    T op;
    explicit model(T x) : op(std::move(x)) {}
    std::shared_ptr<concept_t> clone() const override { return std::make_shared<model>(op); }
    std::string name() const override { return op.name(); }
    op_traits traits() const override {
        if constexpr (detail::has_traits<T>) return op.traits();
        else return {};
    }
    shape compute_shape(const std::vector<shape>& in, const std::vector<module_ref>& mods) const override {
        if constexpr (detail::has_compute_shape_mods<T>) return op.compute_shape(in, mods);
        else if constexpr (detail::has_compute_shape<T>) return op.compute_shape(in);
        else throw_error(error_code::unsupported, op.name() + " has no compute_shape");
    }
    std::optional<shape> compute_shape_values(const std::vector<shape>& in,
                                              const std::vector<std::optional<argument>>& values) const override {
        if constexpr (detail::has_compute_shape_values<T>) return op.compute_shape(in, values);
        else return std::nullopt;
    }
    bool has_compute_shape_values() const override { return detail::has_compute_shape_values<T>; }
    bool has_compute() const override {
        return detail::has_compute<T> || detail::has_compute_ctx<T> || detail::has_compute_mods<T>;
    }
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args,
                     const std::vector<module_ref>& mods, const run_module_fn& run) const override {
        if constexpr (detail::has_compute_mods<T>) return op.compute(out, args, mods, run);
        else if constexpr (detail::has_compute_ctx<T>) return op.compute(ctx, out, args);
        else if constexpr (detail::has_compute<T>) return op.compute(out, args);
        else throw_no_compute(op.name());
    }
    std::ptrdiff_t output_alias(const std::vector<shape>& in) const override {
        if constexpr (detail::has_output_alias<T>) return op.output_alias(in);
        else return -1;
    }
    std::string kernel_info() const override {
        if constexpr (detail::has_kernel_info<T>) return op.kernel_info();
        else if constexpr (detail::has_isa<T>) return op.isa();
        else return {};
    }
    void finalize(context& ctx, const shape& out, const std::vector<shape>& in,
                  const std::vector<argument>& constants) override {
        if constexpr (detail::has_finalize_constants<T>) op.finalize(ctx, out, in, constants);
        else if constexpr (detail::has_finalize<T>) op.finalize(ctx, out, in);
    }
    value to_value() const override {
        if constexpr (reflectable<T>) return kiln::to_value(op);
        else return value::make_object();
    }
    void from_value(const value& v) override {
        if constexpr (reflectable<T>) kiln::from_value(v, op);
    }
    const std::type_info& type() const override { return typeid(T); }
    const void* ptr() const override { return &op; }
};

template <class T>
    requires(!std::is_same_v<std::decay_t<T>, operation> && detail::op_struct<T>)
operation::operation(T op) : self_(std::make_shared<model<T>>(std::move(op))) {}

template <class T>
const T& operation::get() const {
    if (auto* p = any_cast<T>()) return *p;
    throw_bad_op_cast(name(), typeid(T).name());
}

}  // namespace kiln
