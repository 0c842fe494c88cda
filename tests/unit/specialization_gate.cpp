// Registers the gated test targets of specialization_gate.hpp and the op its model uses.
#include "specialization_gate.hpp"

#include <kiln/register_op.hpp>

namespace kiln::test {
KILN_REGISTER_OP(test_scale)

namespace spec {
namespace {
const bool registered = [] {
    register_target(std::make_shared<gated_target>(false));
    register_target(std::make_shared<gated_target>(true));
    return true;
}();
}  // namespace
}  // namespace spec
}  // namespace kiln::test
