// The op registry: one place that maps op names to constructors, used by the ONNX
// parser, tests and the .kiln loader (make_op("transpose", {{"perm", {1, 0}}})).
#pragma once
#include <kiln/operation.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kiln {

void register_op_factory(const std::string& name, std::function<operation()> make);
operation make_op(const std::string& name, const value& attributes = value::make_object());
// make_op for what people write by hand (the Python and C build APIs): an attribute the op does
// not have is an error naming it, where make_op (the .kiln loader's forward compatibility) skips it.
operation make_op_checked(const std::string& name, const value& attributes);
bool has_op(const std::string& name);
std::vector<std::string> get_operator_names();  // sorted

template <class T>
struct op_registrar {
    op_registrar() { register_op_factory(T{}.name(), [] { return operation(T{}); }); }
};

#define KILN_CONCAT_IMPL(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_IMPL(a, b)
// Registers op struct T (default-constructible) under T{}.name(). Use in a .cpp file.
#define KILN_REGISTER_OP(T) \
    static const ::kiln::op_registrar<T> KILN_CONCAT(kiln_op_registrar_, __COUNTER__){};

}  // namespace kiln
