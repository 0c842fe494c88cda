// The sets of input shapes a dynamic program compiles ahead, and how its named dims are
// told apart: the optimals' and the buckets' combinations (some dims fixed, the others
// ranges), and how much of the program a set of free names leaves dynamic.
#pragma once
#include <kiln/compile_options.hpp>
#include <kiln/module.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

// Input name -> its shape (static, or with some dims still ranges).
using shape_map = std::unordered_map<std::string, shape>;

// The key of an input dim in `values` maps: its name, or "#input:axis" for an unnamed one;
// nullopt for a dim spelled as an expression of names.
std::optional<std::string> dim_key(const std::string& input, std::size_t axis, const dynamic_dimension& d);

// The inputs' declared shapes with the dims named in `values` fixed at those sizes (a dim
// spelled as an expression too, when all its names are given); the others stay ranges.
shape_map fix_dims(const module& main, const std::map<std::string, std::int64_t>& values);

// Each combination of the optimals of the dims that have them (at most `limit`), with
// those dims fixed and the others left as ranges.
std::vector<shape_map> optimal_shape_sets(const module& main, std::size_t limit);

// Each combination of the buckets' sizes (at most `limit`), those dims fixed and every
// other dim a range; sizes outside a dim's range are left out.
std::vector<shape_map> bucket_shape_sets(const module& main, const std::vector<dim_buckets>& buckets,
                                         std::size_t limit);

// The share of main's dynamic instructions that become static when only the names `free`
// stay ranges.
double static_fraction(const module& main, const std::set<std::string>& free);

// The names of the dims that `set` leaves as ranges ("#input:axis" for unnamed ones).
std::set<std::string> free_names(const shape_map& set);

}  // namespace kiln
