// Execution state of the gpu target. For now the options a program compiles with; the
// device, its stream and the library handles (cuDNN, cuBLASLt) join when programs run on
// a device (issue 21's next steps).
#pragma once
#include "targets/gpu/gpu_options.hpp"

#include <kiln/context.hpp>

#include <memory>

namespace kiln::gpu {

class gpu_context final : public context {
public:
    explicit gpu_context(const compile_options& opts) : options_(read_gpu_options(opts)) {}
    std::string target_name() const override { return "gpu"; }
    // A program compiled without a device (compile_unavailable_reason) runs only on one.
    std::shared_ptr<void> begin_run() override;
    const gpu_options& options() const { return options_; }

private:
    gpu_options options_;
};

}  // namespace kiln::gpu
