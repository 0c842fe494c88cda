// What the front ends share besides the repository: whether the server is draining (after
// SIGTERM: not ready, new inferences refused with 503) and how many inferences are in
// flight (the drain waits for them).
#pragma once
#include "serve/auth.hpp"

#include <atomic>

namespace kiln::serve {

struct server_state {
    std::atomic<bool> started{false};  // the repository's first load is done
    std::atomic<bool> draining{false};
    std::atomic<int> in_flight{0};
    // The repository extension's load and unload (off in poll mode: the folder decides).
    // Set before the front ends start.
    bool repository_api = true;
    access_control auth;  // --auth-token-env / --auth-token-file; off when empty
};

}  // namespace kiln::serve
