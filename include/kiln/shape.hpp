// A tensor's element type, dimensions and strides (in elements), or a tuple,
// sequence or optional of shapes. Immutable; copies share one implementation.
//
// Dimensions may be dynamic: {min, max, optimals}. A max of `dynamic_dimension::unbounded`
// means "any size" (a value-dependent dimension, e.g. Reshape to a computed shape).
// Dynamic shapes have no strides; they only describe what a run may see. A dynamic
// dimension may carry a symbol (see dim_expr.hpp) that ties it to other dims.
#pragma once
#include <kiln/types.hpp>

#include <cstddef>
#include <initializer_list>
#include <iosfwd>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kiln {

struct dynamic_dimension {
    static constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();
    std::size_t min = 0;
    std::size_t max = unbounded;
    std::set<std::size_t> optimals{};
    // The dimension's name as an affine expression over named sizes (dim_expr's text):
    // "batch", "past + sequence". Dims with the same symbol are the same size in every
    // run, which lets shape inference tell that Concat(past_key, key) fits a mask of
    // "past + sequence". Empty: anonymous, it varies independently of every other dim.
    std::string symbol{};

    bool is_fixed() const { return min == max; }
    bool has_optimal() const { return !optimals.empty(); }
    bool contains(std::size_t d) const { return d >= min && d <= max; }
    friend bool operator==(const dynamic_dimension&, const dynamic_dimension&) = default;
};
std::ostream& operator<<(std::ostream& os, const dynamic_dimension& d);

class shape {
public:
    enum class kind : std::uint8_t { tensor, tuple, sequence, optional };

    shape();  // float32 scalar
    explicit shape(type t);  // scalar of type t
    shape(type t, std::vector<std::size_t> lens);
    shape(type t, std::vector<std::size_t> lens, std::vector<std::size_t> strides);
    // Dimensions that may vary between runs (all-fixed dims give a static shape).
    static shape make_dynamic(type t, std::vector<dynamic_dimension> dims);

    static shape tuple(std::vector<shape> elements);
    // A sequence whose items all fit `element` (which may be dynamic).
    static shape sequence(shape element);
    // An optional holding a value of shape `element`.
    static shape optional(shape element);
    // Row-major strides for lens.
    static std::vector<std::size_t> standard_strides(const std::vector<std::size_t>& lens);

    kind get_kind() const;
    bool is_tensor() const { return get_kind() == kind::tensor; }
    bool is_tuple() const { return get_kind() == kind::tuple; }
    bool is_sequence() const { return get_kind() == kind::sequence; }
    bool is_optional() const { return get_kind() == kind::optional; }
    // Tuple elements; for sequence and optional, the one element shape.
    const std::vector<shape>& sub_shapes() const;

    type get_type() const;  // of the tensor (or of the element, for sequence/optional)
    std::size_t ndim() const;
    const std::vector<std::size_t>& lens() const;     // throws on dynamic shapes
    const std::vector<std::size_t>& strides() const;  // throws on dynamic shapes
    // The default shape of a tensor's dims, the one code written for static models builds
    // its input from: each dynamic dim's first optimal, else its min (lens() when static).
    std::vector<std::size_t> opt_lens() const;
    std::vector<std::size_t> min_lens() const;  // each dim's min (lens() when static)
    std::vector<std::size_t> max_lens() const;  // each dim's max (lens() when static)
    std::size_t elements() const;
    // Memory the layout spans, in bytes: (1 + sum((len-1)*stride)) * type_size,
    // 0 when any len is 0. For a tuple, the sum over its elements.
    std::size_t bytes() const;
    std::size_t element_space() const;  // same in elements
    std::size_t type_size() const;

    bool scalar() const { return is_tensor() && !dynamic() && ndim() == 0; }
    bool standard() const;     // row-major packed, no broadcasting
    bool packed() const;       // no gaps and no broadcasting (maybe permuted)
    bool transposed() const;   // packed but not row-major
    bool broadcasted() const;  // some dimension of len > 1 has stride 0
    bool dynamic() const;      // any dynamic dimension (or a dynamic element shape)

    // Small integer tensors may carry their values, each a dim_expr's text ("" where not
    // known): exporters compute shapes with Shape, Gather and Concat, and when those
    // values follow from named input dims ("batch", "past + sequence") shape inference
    // knows what a Reshape to them gives. An annotation: not part of equality or hash.
    static constexpr std::size_t max_valued_elements = 16;
    shape with_values(std::vector<std::string> values) const;  // static int32/int64/bool tensors only
    const std::vector<std::string>& values() const;            // empty: none known
    bool has_values() const { return !values().empty(); }
    const std::vector<dynamic_dimension>& dyn_dims() const;  // fixed dims too, for dynamic shapes
    // The dims as dynamic dimensions (fixed ones as {d, d}), for static and dynamic shapes.
    std::vector<dynamic_dimension> to_dynamic_dims() const;

    // Offset in elements of a multi-index, and of the i-th element in row-major order.
    std::size_t index(const std::vector<std::size_t>& idx) const;
    std::size_t index(std::size_t linear) const;
    // Row-major multi-index of a linear index.
    std::vector<std::size_t> multi(std::size_t linear) const;

    shape with_type(type t) const;
    shape with_lens(std::vector<std::size_t> lens) const;  // standard strides
    shape as_standard() const;  // same type and lens, row-major strides

    std::string to_string() const;
    friend bool operator==(const shape& a, const shape& b);
    friend bool operator!=(const shape& a, const shape& b) { return !(a == b); }
    // Same type and lens (strides may differ).
    bool same_lens_and_type(const shape& other) const;
    std::size_t hash() const;

    struct impl;

private:
    explicit shape(std::shared_ptr<const impl> p);
    std::shared_ptr<const impl> impl_;
};

std::ostream& operator<<(std::ostream& os, const shape& s);

}  // namespace kiln
