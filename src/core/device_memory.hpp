// Device memory owned by an argument, for device targets (gpu) without a change to the
// public argument API: a target wraps its allocation in a shared_ptr whose deleter is a
// device_memory_owner, and argument's (shape, shared_ptr) constructor marks such a buffer
// memory_location::device on that device (std::get_deleter finds it; views keep it). The
// deleter frees the memory with the target's function (cudaFree / cudaFreeAsync).
#pragma once
#include <functional>

namespace kiln::detail {

struct device_memory_owner {
    int device_id = 0;
    std::function<void(char*)> release;
    void operator()(char* p) const {
        if (p && release) release(p);
    }
};

}  // namespace kiln::detail
