// Host memory for tensors and loaded payloads: 64-byte aligned, and buffers of several MiB on
// 2 MiB pages where the kernel grants them on request (transparent huge pages in `madvise`
// mode, Debian's default). Reading a 235 MB `.kiln` into 4 KiB pages took ~57,000 page faults
// (about half a second of system time); a huge page is one fault for 512 of them.
#pragma once
#include <cstddef>

namespace kiln::detail {

// At least `bytes` (rounded up to 64; 64 for 0) bytes, uninitialised; nullptr when out of
// memory. Free with std::free.
void* allocate_host(std::size_t bytes);

}  // namespace kiln::detail
