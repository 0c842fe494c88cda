// A symbolic dimension size: a polynomial c0 + c1*name1 + c2*name2 + ... whose terms may
// also be products of names (c*name1*name2: PyTorch's attention reshapes a [seq, batch, E]
// tensor to [seq * batch, E]).
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
#include <set>
#include <vector>

namespace kiln {

class dim_expr {
public:
    dim_expr() = default;  // the constant 0
    static dim_expr constant(std::int64_t c);
    static dim_expr symbol(const std::string& name);
    // The product of the names (at least one), coefficient 1.
    static dim_expr product(std::vector<std::string> names);

    // "a + 2*b - 1", "2*a*b + c", names [A-Za-z_][A-Za-z0-9_]*; nullopt when the text is not
    // of that form.
    static std::optional<dim_expr> parse(std::string_view text);
    // An ONNX dim_param: the expression it spells when it reads as one, else one symbol
    // named by the text with every character outside [A-Za-z0-9_] replaced by '_'.
    static dim_expr from_dim_param(std::string_view text);

    std::string to_string() const;
    std::int64_t constant_term() const { return constant_; }
    // Term -> coefficient, never 0. A term is a name, or names joined by '*' (sorted).
    const std::map<std::string, std::int64_t>& terms() const { return terms_; }
    // The names a term is the product of.
    static std::vector<std::string> factors(const std::string& term);
    // Every name the expression mentions.
    std::set<std::string> names() const;
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
