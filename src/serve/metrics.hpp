// Prometheus text exposition (version 0.0.4) of the per-model counters, as Triton's nv_
// metrics under kiln_ names. Debian has no prometheus-cpp; the format is a few lines.
#pragma once
#include "serve/model_repository.hpp"

#include <string>

namespace kiln::serve {

std::string metrics_text(const model_repository& repo);

}  // namespace kiln::serve
