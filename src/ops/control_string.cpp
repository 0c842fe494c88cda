#include "ops/control_string.hpp"

#include "ops/common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

namespace kiln::op {

namespace {

void check_strings(const std::string& op, const shape& s, const std::string& what = "input") {
    if (!s.is_tensor() || s.get_type() != type::string)
        throw_error(error_code::type, op + ": " + what + " must be a string tensor, got " + s.to_string());
}

std::string to_lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}
std::string to_upper(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Python's str.split(sep, maxsplit).
std::vector<std::string> py_split(const std::string& s, const std::string& sep, std::int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep.empty()) {
        std::size_t i = 0;
        const std::size_t n = s.size();
        while (true) {
            while (i < n && is_space(s[i])) ++i;
            if (i >= n) break;
            if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
                out.push_back(s.substr(i));  // the rest, leading whitespace dropped
                break;
            }
            std::size_t j = i;
            while (j < n && !is_space(s[j])) ++j;
            out.push_back(s.substr(i, j - i));
            i = j;
        }
        return out;
    }
    std::size_t start = 0;
    while (true) {
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) break;
        auto pos = s.find(sep, start);
        if (pos == std::string::npos) break;
        out.push_back(s.substr(start, pos - start));
        start = pos + sep.size();
    }
    out.push_back(s.substr(start));
    return out;
}

}  // namespace

// ---- StringNormalizer ----

shape string_normalizer::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("string_normalizer", inputs, 1);
    const auto& s = inputs[0];
    check_strings("string_normalizer", s);
    if (case_change_action != "NONE" && case_change_action != "LOWER" && case_change_action != "UPPER")
        throw_error(error_code::invalid_argument, "string_normalizer: unknown case_change_action '" +
                                                      case_change_action + "'");
    if (s.ndim() == 1) return shape::make_dynamic(type::string, {{0, dynamic_dimension::unbounded, {}}});
    if (s.ndim() == 2 && !s.dynamic() && s.lens()[0] == 1)
        return shape::make_dynamic(type::string, {{1, 1, {}}, {0, dynamic_dimension::unbounded, {}}});
    throw_error(error_code::shape, "string_normalizer: input must be [C] or [1, C], got " + s.to_string());
}

argument string_normalizer::compute(const shape&, const std::vector<argument>& args) const {
    auto in = args[0].to_vector<std::string>();
    std::set<std::string> stops;
    for (auto& w : stopwords) stops.insert(is_case_sensitive ? w : to_lower(w));
    std::vector<std::string> kept;
    for (auto& w : in) {
        if (stops.count(is_case_sensitive ? w : to_lower(w))) continue;
        kept.push_back(case_change_action == "LOWER"   ? to_lower(w)
                       : case_change_action == "UPPER" ? to_upper(w)
                                                       : w);
    }
    if (kept.empty()) kept.emplace_back();
    std::vector<std::size_t> lens{kept.size()};
    if (args[0].get_shape().ndim() == 2) lens.insert(lens.begin(), 1);
    return literal(shape(type::string, lens), kept).get_argument();
}

// ---- StringSplit ----

shape string_split::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("string_split", inputs, 1);
    check_strings("string_split", inputs[0]);
    auto dims = inputs[0].to_dynamic_dims();
    auto lengths = shape::make_dynamic(type::int64, dims);
    dims.push_back({0, dynamic_dimension::unbounded, {}});
    return shape::tuple({shape::make_dynamic(type::string, dims), lengths});
}

argument string_split::compute(const shape&, const std::vector<argument>& args) const {
    auto in = args[0].to_vector<std::string>();
    std::vector<std::vector<std::string>> parts;
    std::size_t widest = 0;
    for (auto& s : in) {
        parts.push_back(py_split(s, delimiter, maxsplit));
        widest = std::max(widest, parts.back().size());
    }
    auto lens = args[0].get_shape().lens();
    argument lengths(shape(type::int64, lens));
    lens.push_back(widest);
    argument subs(shape(type::string, lens));
    for (std::size_t i = 0; i < parts.size(); ++i) {
        lengths.data_as<std::int64_t>()[i] = static_cast<std::int64_t>(parts[i].size());
        for (std::size_t j = 0; j < parts[i].size(); ++j) subs.data_as<std::string>()[i * widest + j] = parts[i][j];
    }
    return argument::make_tuple({subs, lengths});
}

// ---- StringConcat ----

shape string_concat::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("string_concat", inputs, 2);
    check_strings("string_concat", inputs[0], "input 0");
    check_strings("string_concat", inputs[1], "input 1");
    return shape(type::string, broadcast_lens({inputs[0].lens(), inputs[1].lens()}, "string_concat"));
}

argument string_concat::compute(const shape& out, const std::vector<argument>& args) const {
    auto a = args[0].reshape(broadcast_to(args[0].get_shape(), out.lens()));
    auto b = args[1].reshape(broadcast_to(args[1].get_shape(), out.lens()));
    argument r(out);
    tensor_view<std::string> va{a.data_as<std::string>(), a.get_shape()};
    tensor_view<std::string> vb{b.data_as<std::string>(), b.get_shape()};
    for (std::size_t i = 0; i < out.elements(); ++i) r.data_as<std::string>()[i] = va[i] + vb[i];
    return r;
}

// ---- RegexFullMatch ----

shape regex_full_match::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("regex_full_match", inputs, 1);
    check_strings("regex_full_match", inputs[0]);
    try {
        std::regex re(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        throw_error(error_code::invalid_argument, "regex_full_match: invalid pattern '" + pattern + "': " + e.what());
    }
    return inputs[0].with_type(type::bool_).as_standard();
}

argument regex_full_match::compute(const shape& out, const std::vector<argument>& args) const {
    std::regex re(pattern, std::regex::ECMAScript);
    auto in = args[0].to_vector<std::string>();
    argument r(out);
    for (std::size_t i = 0; i < in.size(); ++i) r.data_as<bool>()[i] = std::regex_match(in[i], re);
    return r;
}

// ---- TfIdfVectorizer ----

shape tfidf_vectorizer::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("tfidf_vectorizer", inputs, 1);
    const auto& s = inputs[0];
    check_rank("tfidf_vectorizer", s, 1, 2);
    auto t = s.get_type();
    if (t != type::int32 && t != type::int64 && t != type::string)
        throw_error(error_code::type, "tfidf_vectorizer: input must be int32, int64 or string, got " +
                                          std::string(type_name(t)));
    if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
        throw_error(error_code::invalid_argument, "tfidf_vectorizer: unknown mode '" + mode + "'");
    if (min_gram_length < 1 || max_gram_length < min_gram_length)
        throw_error(error_code::invalid_argument, "tfidf_vectorizer: bad gram lengths");
    if (static_cast<std::size_t>(max_gram_length) > ngram_counts.size())
        throw_error(error_code::invalid_argument, "tfidf_vectorizer: ngram_counts has fewer entries than max_gram_length");
    if (ngram_indexes.empty()) throw_error(error_code::invalid_argument, "tfidf_vectorizer: no ngram_indexes");
    auto width = static_cast<std::size_t>(*std::max_element(ngram_indexes.begin(), ngram_indexes.end()) + 1);
    auto dims = s.to_dynamic_dims();
    dims.back() = {width, width, {}};
    return shape::make_dynamic(type::float32, dims);
}

argument tfidf_vectorizer::compute(const shape& out_shape, const std::vector<argument>& args) const {
    const auto& s = args[0].get_shape();
    const bool strings = s.get_type() == type::string;
    if (strings != !pool_strings.empty())
        throw_error(error_code::type, "tfidf_vectorizer: input type does not match the pool");
    // Tokens as strings (integers printed), so one table serves both pools.
    std::vector<std::string> tokens;
    if (strings) tokens = args[0].to_vector<std::string>();
    else
        for (auto v : args[0].to_vector<std::int64_t>()) tokens.push_back(std::to_string(v));
    std::vector<std::string> pool = pool_strings;
    if (!strings)
        for (auto v : pool_int64s) pool.push_back(std::to_string(v));
    // n-gram -> output column. The pool holds the 1-grams from ngram_counts[0], the
    // 2-grams from ngram_counts[1], ...
    std::map<std::vector<std::string>, std::size_t> table;
    std::size_t ngram_no = 0;
    for (std::size_t n = 1; n <= ngram_counts.size(); ++n) {
        auto begin = static_cast<std::size_t>(ngram_counts[n - 1]);
        auto end = n < ngram_counts.size() ? static_cast<std::size_t>(ngram_counts[n]) : pool.size();
        if (begin > end || end > pool.size() || (end - begin) % n != 0)
            throw_error(error_code::invalid_argument, "tfidf_vectorizer: ngram_counts do not fit the pool");
        for (std::size_t at = begin; at < end; at += n, ++ngram_no) {
            if (ngram_no >= ngram_indexes.size())
                throw_error(error_code::invalid_argument, "tfidf_vectorizer: fewer ngram_indexes than n-grams");
            table[std::vector<std::string>(pool.begin() + static_cast<std::ptrdiff_t>(at),
                                           pool.begin() + static_cast<std::ptrdiff_t>(at + n))] =
                static_cast<std::size_t>(ngram_indexes[ngram_no]);
        }
    }
    const std::size_t rows = s.ndim() == 2 ? s.lens()[0] : 1;
    const std::size_t cols = s.lens().back();
    const std::size_t width = out_shape.dynamic() ? out_shape.dyn_dims().back().max : out_shape.lens().back();
    std::vector<double> counts(rows * width, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
        const std::string* row = tokens.data() + r * cols;
        for (std::size_t i = 0; i < cols; ++i) {
            for (auto n = static_cast<std::size_t>(min_gram_length); n <= static_cast<std::size_t>(max_gram_length); ++n) {
                // A 1-gram is the same for every skip: count it once.
                std::size_t max_skip = n == 1 ? 0 : static_cast<std::size_t>(max_skip_count);
                for (std::size_t skip = 0; skip <= max_skip; ++skip) {
                    std::size_t stride = skip + 1;
                    if (i + (n - 1) * stride >= cols) break;
                    std::vector<std::string> gram;
                    for (std::size_t k = 0; k < n; ++k) gram.push_back(row[i + k * stride]);
                    auto it = table.find(gram);
                    if (it != table.end()) counts[r * width + it->second] += 1.0;
                }
            }
        }
    }
    // weights[i] belongs to the i-th n-gram of the pool, i.e. to column ngram_indexes[i].
    std::vector<double> col_weight(width, 1.0);
    for (std::size_t i = 0; i < weights.size() && i < ngram_indexes.size(); ++i)
        col_weight[static_cast<std::size_t>(ngram_indexes[i])] = weights[i];
    for (std::size_t i = 0; i < counts.size(); ++i) {
        double w = col_weight[i % width];
        if (mode == "IDF") counts[i] = counts[i] > 0 ? w : 0.0;
        else if (mode == "TFIDF") counts[i] *= w;
    }
    std::vector<std::size_t> lens{width};
    if (s.ndim() == 2) lens.insert(lens.begin(), rows);
    return literal(shape(type::float32, lens), counts).get_argument();
}

KILN_REGISTER_OP(string_normalizer)
KILN_REGISTER_OP(string_split)
KILN_REGISTER_OP(string_concat)
KILN_REGISTER_OP(regex_full_match)
KILN_REGISTER_OP(tfidf_vectorizer)

}  // namespace kiln::op
