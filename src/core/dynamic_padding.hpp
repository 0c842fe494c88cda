// Padding a call up to a bucket (compile_options::dynamic_buckets): a program whose named
// dim is a set of independent rows (every instruction maps row i of its inputs to row i of
// its result, along axis 0) gives the same first n rows at any larger size, so a call of n
// rows can run on the program compiled for the next bucket b >= n, its inputs padded to b
// rows and its outputs cut back to n. Whether a program is row-wise in a dim is decided
// from its parsed IR, op by op (docs/architecture.md lists the ops); anything else keeps
// the dim unpadded, never a changed result.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/compile_options.hpp>
#include <kiln/module.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct bucket_padding {
    std::string dim;                   // the named dim (axis 0 of `inputs` and `outputs`)
    std::vector<std::size_t> sizes;    // its buckets, ascending
    std::vector<std::string> inputs;   // parameters whose axis 0 is the dim
    std::vector<std::size_t> outputs;  // indices of the results whose axis 0 is the dim
};

// Why `main` is not row-wise in the dim named `dim` (naming the first instruction that is
// not), or nullopt when it is.
std::optional<std::string> why_not_row_wise(const module& main, const std::string& dim);

// The buckets of `buckets` whose dims `main` can be padded along.
std::vector<bucket_padding> paddable_buckets(const module& main, const std::vector<dim_buckets>& buckets);

// A call's inputs padded up to the next bucket of each paddable dim (the last row repeated,
// so the padding holds values the model already accepts), and the rows to keep of each
// output. nullopt when nothing is padded: each size is a bucket, above the largest, or
// the inputs disagree on it.
struct padded_call {
    param_map inputs;
    std::vector<std::pair<std::size_t, std::size_t>> cut;  // output index, rows to keep
};
std::optional<padded_call> pad_call(const std::vector<bucket_padding>& padding, const param_map& checked);

// The results of a padded call with the padding rows cut off (views of their first rows).
std::vector<argument> cut_outputs(std::vector<argument> results, const padded_call& call);

}  // namespace kiln
