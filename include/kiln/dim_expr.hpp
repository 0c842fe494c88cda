// A symbolic dimension size: an affine expression c0 + c1*name1 + c2*name2 + ...
//
// Exporters name the dims that change between runs ("batch", "sequence", and for a
// KV cache "past_sequence + sequence"). Kiln keeps those names: two inputs that share
// "batch" share the dimension, and shape inference derives expressions such as
// "past + sequence" for the result of Concat(past_key, key) by evaluating ops at
// consistent sizes of the names (operation::compute_shape). The text form is the
// canonical one that dynamic_dimension::symbol stores: names sorted, "2*n + 1".
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

class dim_expr {
public:
    dim_expr() = default;  // the constant 0
    static dim_expr constant(std::int64_t c);
    static dim_expr symbol(const std::string& name);

    // "a + 2*b - 1", names [A-Za-z_][A-Za-z0-9_]*; nullopt when the text is not of that form.
    static std::optional<dim_expr> parse(std::string_view text);
    // An ONNX dim_param: the expression it spells when it reads as one, else one symbol
    // named by the text with every character outside [A-Za-z0-9_] replaced by '_'.
    static dim_expr from_dim_param(std::string_view text);

    std::string to_string() const;
    std::int64_t constant_term() const { return constant_; }
    // Name -> coefficient, never 0.
    const std::map<std::string, std::int64_t>& terms() const { return terms_; }
    bool is_constant() const { return terms_.empty(); }
    // A single name with coefficient 1 and no constant.
    bool is_symbol() const;
    // nullopt when a name has no value.
    std::optional<std::int64_t> evaluate(const std::map<std::string, std::int64_t>& values) const;

    dim_expr& operator+=(const dim_expr& o);
    dim_expr& operator*=(std::int64_t k);
    friend dim_expr operator+(dim_expr a, const dim_expr& b) { return a += b; }
    friend dim_expr operator-(dim_expr a, dim_expr b) { return a += (b *= -1); }
    friend dim_expr operator*(dim_expr a, std::int64_t k) { return a *= k; }
    friend bool operator==(const dim_expr&, const dim_expr&) = default;

private:
    std::int64_t constant_ = 0;
    std::map<std::string, std::int64_t> terms_;
};

}  // namespace kiln
