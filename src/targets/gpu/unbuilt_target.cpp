// Built instead of the gpu target when CMake found no CUDA 13 / cuDNN 9 (cmake/KilnGpu.cmake):
// `gpu` stays a known name that says why it cannot run, rather than an unknown target.
#include <kiln/errors.hpp>
#include <kiln/target.hpp>

namespace kiln::gpu {

namespace {

class unbuilt_target final : public target {
public:
    std::string name() const override { return "gpu"; }
    std::string unavailable_reason() const override { return "built without CUDA"; }
    std::shared_ptr<context> make_context(const compile_options&) const override { refuse(); }
    std::vector<pass> get_passes(context&, const compile_options&) const override { refuse(); }

private:
    [[noreturn]] static void refuse() { throw_error(error_code::unsupported, "target gpu: built without CUDA"); }
};

const bool registered = [] {
    register_target(std::make_shared<unbuilt_target>());
    return true;
}();

}  // namespace

}  // namespace kiln::gpu
