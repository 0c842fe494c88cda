# find_package(Kiln CONFIG) gives
#   Kiln::kiln      the C API (libkiln_c) with kiln.h and the header-only C++ wrapper kiln.hpp,
#                   the interface applications are meant to build on;
#   Kiln::kiln_cxx  libkiln's internal C++ API, for code that extends Kiln (it changes
#                   between versions).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/KilnTargets.cmake")
