// The Open Inference Protocol's tensor datatype names ("FP32", "INT64", ...) and Kiln's
// element types.
#pragma once
#include <kiln/types.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace kiln::serve {

// nullopt for a name the protocol does not define or Kiln cannot serve (BYTES).
std::optional<type> type_of_datatype(std::string_view datatype);
// "" for a Kiln type the protocol has no name for (fp8, int4, ...).
std::string datatype_of(type t);

}  // namespace kiln::serve
