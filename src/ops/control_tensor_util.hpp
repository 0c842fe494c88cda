// Whole-tensor copies along one axis, for any element type (strings included):
// the slicing and stacking that Scan, Loop and the sequence ops do.
#pragma once
#include <kiln/argument.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::op {

// Elements [start, start+count) of `a` along `axis` (the axis kept), row-major.
argument slice_axis(const argument& a, std::size_t axis, std::size_t start, std::size_t count);
// Index `idx` of `a` along `axis`, the axis removed.
argument take_axis(const argument& a, std::size_t axis, std::size_t idx);
// Concatenation along `axis` of tensors with one type and equal other dimensions.
// `what` names the op in errors. Needs at least one item.
argument concat_axis(const std::vector<argument>& items, std::size_t axis, const std::string& what);
// Stacks equal-shaped tensors along a new axis `axis` (0..rank). `empty_item` gives
// the item shape when `items` is empty.
argument stack_axis(const std::vector<argument>& items, std::size_t axis, const shape& empty_item,
                    const std::string& what);

}  // namespace kiln::op
