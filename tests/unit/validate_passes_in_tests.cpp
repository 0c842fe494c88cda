// Issue 2: every module is validated after each pass in tests, not only in debug
// builds. Setting KILN_VALIDATE before main() makes every compile in this binary do so
// (an explicit KILN_VALIDATE=0 in the environment still wins).
#include <cstdlib>

namespace {
const bool validate_passes = [] { return setenv("KILN_VALIDATE", "1", 0) == 0; }();
}  // namespace
