// The error channel, version, element types and the handles' shared helpers.
#include "handles.hpp"

#include <cstring>
#include <iterator>

namespace kiln::capi {

namespace {
thread_local std::string last_message;
}

void invalid(const std::string& message) { throw_error(error_code::invalid_argument, message); }

kiln_status fail(kiln_status status, const char* function, const char* message) noexcept {
    try {
        last_message = std::string(message) + " (in " + function + ")";
    } catch (...) {
        // No memory for the message: keep a fixed one rather than a stale one.
        last_message.clear();
        try {
            last_message = "out of memory while recording an error";
        } catch (...) {
        }
    }
    return status;
}

const char* c_str(const std::string& s) { return s.c_str(); }

namespace {
struct type_pair {
    kiln_type c;
    kiln::type t;
};
constexpr type_pair types[] = {
    {KILN_TYPE_FLOAT32, type::float32},
    {KILN_TYPE_UINT8, type::uint8},
    {KILN_TYPE_INT8, type::int8},
    {KILN_TYPE_UINT16, type::uint16},
    {KILN_TYPE_INT16, type::int16},
    {KILN_TYPE_INT32, type::int32},
    {KILN_TYPE_INT64, type::int64},
    {KILN_TYPE_STRING, type::string},
    {KILN_TYPE_BOOL, type::bool_},
    {KILN_TYPE_FLOAT16, type::float16},
    {KILN_TYPE_FLOAT64, type::float64},
    {KILN_TYPE_UINT32, type::uint32},
    {KILN_TYPE_UINT64, type::uint64},
    {KILN_TYPE_BFLOAT16, type::bfloat16},
    {KILN_TYPE_FLOAT8E4M3FN, type::float8e4m3fn},
    {KILN_TYPE_FLOAT8E4M3FNUZ, type::float8e4m3fnuz},
    {KILN_TYPE_FLOAT8E5M2, type::float8e5m2},
    {KILN_TYPE_FLOAT8E5M2FNUZ, type::float8e5m2fnuz},
    {KILN_TYPE_UINT4, type::uint4},
    {KILN_TYPE_INT4, type::int4},
    {KILN_TYPE_FLOAT4E2M1, type::float4e2m1},
    {KILN_TYPE_FLOAT8E8M0, type::float8e8m0},
    {KILN_TYPE_UINT2, type::uint2},
    {KILN_TYPE_INT2, type::int2},
};
// A new kiln::type must get a C number before it can cross the C API.
static_assert(std::size(types) == static_cast<std::size_t>(type_count));
}  // namespace

kiln::type to_type(kiln_type t) {
    for (auto& p : types)
        if (p.c == t) return p.t;
    invalid("unknown kiln_type " + std::to_string(static_cast<int>(t)));
}

kiln_type from_type(kiln::type t) {
    for (auto& p : types)
        if (p.t == t) return p.c;
    throw_error(error_code::runtime, "element type " + std::string(type_name(t)) + " has no kiln_type");
}

}  // namespace kiln::capi

using namespace kiln::capi;

extern "C" {

const char* kiln_last_error_message(void) { return last_message.c_str(); }

const char* kiln_status_name(kiln_status status) {
    if (status == KILN_STATUS_SUCCESS) return "success";
    if (status < KILN_STATUS_PARSE || status > KILN_STATUS_INVALID_ARGUMENT) return "unknown status";
    // Same strings as kiln::error_code_name; string_view of a literal, so NUL-terminated.
    return kiln::error_code_name(static_cast<kiln::error_code>(status)).data();
}

kiln_status kiln_version(int* major, int* minor, int* patch) {
    return guarded(__func__, [&] {
        need(major, "major"), need(minor, "minor"), need(patch, "patch");
        *major = KILN_VERSION_MAJOR, *minor = KILN_VERSION_MINOR, *patch = KILN_VERSION_PATCH;
    });
}

kiln_status kiln_version_string(const char** version) {
    return guarded(__func__, [&] { *need(version, "version") = KILN_VERSION; });
}

}  // extern "C"
