// String operators (StringNormalizer, StringSplit, StringConcat, RegexFullMatch) and
// TfIdfVectorizer. Case changes are ASCII-only: bytes of multi-byte UTF-8 characters
// pass through unchanged.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

// Removes stopwords, then changes case. Input [C] or [1, C]; an all-removed input
// gives one empty string.
struct string_normalizer {
    std::string case_change_action = "NONE";  // LOWER, UPPER, NONE
    bool is_case_sensitive = false;
    std::vector<std::string> stopwords;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.case_change_action, "case_change_action");
        f(self.is_case_sensitive, "is_case_sensitive");
        f(self.stopwords, "stopwords");
    }
    std::string name() const { return "string_normalizer"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Splits each string (Python str.split semantics); tuple(substrings [..., max], lengths).
struct string_split {
    std::string delimiter;  // empty: runs of whitespace
    std::int64_t maxsplit = -1;  // -1: no limit
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.delimiter, "delimiter");
        f(self.maxsplit, "maxsplit");
    }
    std::string name() const { return "string_split"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct string_concat {
    std::string name() const { return "string_concat"; }
    op_traits traits() const { return {.pointwise = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Whole-string match with ECMAScript regular expressions (ONNX names RE2; the common
// subset behaves the same).
struct regex_full_match {
    std::string pattern;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.pattern, "pattern"); }
    std::string name() const { return "regex_full_match"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct tfidf_vectorizer {
    std::int64_t min_gram_length = 1;
    std::int64_t max_gram_length = 1;
    std::int64_t max_skip_count = 0;
    std::string mode = "TF";  // TF, IDF, TFIDF
    std::vector<std::int64_t> ngram_counts;
    std::vector<std::int64_t> ngram_indexes;
    std::vector<std::int64_t> pool_int64s;
    std::vector<std::string> pool_strings;
    std::vector<float> weights;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.min_gram_length, "min_gram_length");
        f(self.max_gram_length, "max_gram_length");
        f(self.max_skip_count, "max_skip_count");
        f(self.mode, "mode");
        f(self.ngram_counts, "ngram_counts");
        f(self.ngram_indexes, "ngram_indexes");
        f(self.pool_int64s, "pool_int64s");
        f(self.pool_strings, "pool_strings");
        f(self.weights, "weights");
    }
    std::string name() const { return "tfidf_vectorizer"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
