#include "targets/gpu/kernels/launch.hpp"

#include <kiln/errors.hpp>

namespace kiln::gpu {

kernel_args pack_args(const std::vector<argument>& args, const std::string& kernel) {
    if (args.empty()) throw_error(error_code::runtime, "gpu kernel " + kernel + ": no output buffer");
    if (args.size() - 1 > max_kernel_inputs)
        throw_error(error_code::unsupported, "gpu kernel " + kernel + ": " + std::to_string(args.size() - 1) +
                                                 " inputs, at most " + std::to_string(max_kernel_inputs));
    kernel_args k{};
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        const bool out = i + 1 == args.size();
        // Messages only on failure: this runs at every launch.
        auto which = [&] { return out ? std::string("its output buffer") : "input " + std::to_string(i); };
        if (!a.get_shape().is_tensor() || a.get_shape().dynamic())
            throw_error(error_code::runtime, "gpu kernel " + kernel + ": " + which() + " is " + a.get_shape().to_string() +
                                                 ", not a static tensor");
        if (a.location() != memory_location::device)
            throw_error(error_code::runtime,
                        "gpu kernel " + kernel + ": " + which() + " (" + a.get_shape().to_string() +
                            ") is host memory; a gpu program's kernels take device memory (with offload_copy off, "
                            "pass device pointers: argument::borrow(shape, ptr, memory_location::device))");
        if (!a.data() && a.get_shape().elements() > 0)
            throw_error(error_code::runtime, "gpu kernel " + kernel + ": " + which() + " has no memory");
        if (out) k.out = a.data();
        else k.in[i] = a.data();
    }
    return k;
}

}  // namespace kiln::gpu
