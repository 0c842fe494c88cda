// StringNormalizer, StringSplit, StringConcat, RegexFullMatch, TfIdfVectorizer.
#include "onnx/onnx_node.hpp"
#include "ops/control_string.hpp"

#include <kiln/errors.hpp>

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_string_normalizer(onnx_node& node) {
    op::string_normalizer s;
    s.case_change_action = node.attr_string("case_change_action", "NONE");
    s.is_case_sensitive = node.attr_int("is_case_sensitive", 0) != 0;
    s.stopwords = node.attr_strings("stopwords", std::vector<std::string>{});
    return {node.add(s, {node.input(0)})};
}

std::vector<instruction_ref> parse_string_split(onnx_node& node) {
    op::string_split s;
    s.delimiter = node.attr_string("delimiter", "");
    s.maxsplit = node.has_attr("maxsplit") ? node.attr_int("maxsplit") : -1;
    return node.unpack(node.add(s, {node.input(0)}), 2);
}

std::vector<instruction_ref> parse_string_concat(onnx_node& node) {
    return {node.add(op::string_concat{}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_regex_full_match(onnx_node& node) {
    return {node.add(op::regex_full_match{node.attr_string("pattern")}, {node.input(0)})};
}

std::vector<instruction_ref> parse_tfidf_vectorizer(onnx_node& node) {
    op::tfidf_vectorizer t;
    t.min_gram_length = node.attr_int("min_gram_length");
    t.max_gram_length = node.attr_int("max_gram_length");
    t.max_skip_count = node.attr_int("max_skip_count");
    t.mode = node.attr_string("mode");
    t.ngram_counts = node.attr_ints("ngram_counts");
    t.ngram_indexes = node.attr_ints("ngram_indexes");
    t.pool_int64s = node.attr_ints("pool_int64s", std::vector<std::int64_t>{});
    t.pool_strings = node.attr_strings("pool_strings", std::vector<std::string>{});
    t.weights = node.attr_floats("weights", std::vector<float>{});
    if (t.pool_int64s.empty() == t.pool_strings.empty())
        node.fail(error_code::parse, "exactly one of pool_int64s and pool_strings must be given");
    return {node.add(t, {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("StringNormalizer", parse_string_normalizer)
KILN_ONNX_OP("StringSplit", parse_string_split)
KILN_ONNX_OP("StringConcat", parse_string_concat)
KILN_ONNX_OP("RegexFullMatch", parse_regex_full_match)
KILN_ONNX_OP("TfIdfVectorizer", parse_tfidf_vectorizer)

}  // namespace kiln::onnx_frontend
