#include "core/host_allocation.hpp"

#include <cstdlib>
#include <sys/mman.h>

namespace kiln::detail {

void* allocate_host(std::size_t bytes) {
    constexpr std::size_t huge_page = std::size_t(2) << 20;
    // Below two huge pages the rounding would waste more than it saves.
    const bool huge = bytes >= 2 * huge_page;
    const std::size_t alignment = huge ? huge_page : 64;
    if (bytes > static_cast<std::size_t>(-1) - alignment) return nullptr;
    const std::size_t rounded = bytes == 0 ? 64 : (bytes + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    if (p != nullptr && huge) ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: refused, it changes nothing
    return p;
}

}  // namespace kiln::detail
