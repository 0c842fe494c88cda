// Instantiates and registers the unary pointwise ops: their kernels are compiled here
// only (the header declares them extern).
#include "ops/pointwise_unary.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

#define KILN_POINTWISE_INSTANTIATE(BASE) \
    template struct pointwise<BASE##_fn>; \
    KILN_REGISTER_OP(pointwise<BASE##_fn>)
KILN_UNARY_POINTWISE(KILN_POINTWISE_INSTANTIATE)

}  // namespace kiln::op
