// A cap on the size of any one tensor buffer allocated on this thread, for harnesses that
// run untrusted models (the fuzzer, a server's sandbox): a valid model may still ask for
// exponentially growing tensors (a Loop that doubles a value every iteration), and under a
// cap that allocation fails with a kiln::error (out_of_memory) naming the size, instead of
// taking the machine's memory first.
#pragma once
#include <cstddef>

namespace kiln {

class allocation_limit {
public:
    // Buffers allocated on this thread may hold at most `max_bytes` each, until this object
    // is destroyed (limits nest; the smallest applies).
    explicit allocation_limit(std::size_t max_bytes);
    ~allocation_limit();
    allocation_limit(const allocation_limit&) = delete;
    allocation_limit& operator=(const allocation_limit&) = delete;

private:
    std::size_t previous_;
};

}  // namespace kiln
