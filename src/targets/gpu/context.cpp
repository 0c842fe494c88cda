#include "targets/gpu/context.hpp"

#include "targets/gpu/availability.hpp"

#include <kiln/errors.hpp>

namespace kiln::gpu {

std::shared_ptr<void> gpu_context::begin_run() {
    if (auto why = unavailable_reason(); !why.empty())
        throw_error(error_code::unsupported, "target gpu is not available: " + why);
    return nullptr;
}

}  // namespace kiln::gpu
