// The IR build API, as MIGraphX's Python module has it: make an empty program, take its main
// module, add parameters, literals and instructions (kiln.op("convolution", padding=[1, 1, 1, 1])),
// a return, then compile and run it like a parsed model.
//
// Modules and instruction references point into a program, so the Python objects hold the
// program (a shared_ptr) as well: a module outlives nothing it refers to.
#include "bindings.hpp"

#include <kiln/instruction.hpp>
#include <kiln/literal.hpp>
#include <kiln/module.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <pybind11/stl.h>

namespace kiln::python {

namespace {

using program_ptr = std::shared_ptr<program>;

struct module_handle {
    program_ptr owner;
    module_ref mod;
};

struct instruction_handle {
    program_ptr owner;
    module_ref mod;
    instruction_ref ins;
};

// Op attributes from Python: bool, int, float, str, and lists / dicts of them.
value value_from_python(const py::handle& obj, const std::string& what) {
    if (obj.is_none()) return value();
    if (py::isinstance<py::bool_>(obj)) return value(obj.cast<bool>());
    if (py::isinstance<py::int_>(obj) || py::hasattr(obj, "__index__")) return value(obj.cast<std::int64_t>());
    if (py::isinstance<py::float_>(obj)) return value(obj.cast<double>());
    if (py::isinstance<py::str>(obj)) return value(obj.cast<std::string>());
    if (py::isinstance<py::dict>(obj)) {
        value v = value::make_object();
        for (auto& [k, x] : obj.cast<py::dict>()) v[k.cast<std::string>()] = value_from_python(x, what);
        return v;
    }
    if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
        value v = value::make_array();
        for (auto& x : obj) v.push_back(value_from_python(x, what));
        return v;
    }
    throw_error(error_code::type, what + ": cannot use a Python " +
                                      py::str(py::type::of(obj).attr("__name__")).cast<std::string>() +
                                      " as an attribute (bool, int, float, str, or lists and dicts of them)");
}

std::vector<instruction_ref> refs(const module_handle& m, const std::vector<instruction_handle>& args,
                                  const std::string& what) {
    std::vector<instruction_ref> out;
    for (const auto& a : args) {
        if (a.mod != m.mod)
            throw_error(error_code::invalid_argument, what + ": an input belongs to another module");
        out.push_back(a.ins);
    }
    return out;
}

}  // namespace

void bind_build(py::module_& m) {
    py::class_<operation>(m, "operation", "An IR operation: a name and its attributes (make one with kiln.op).")
        .def("name", &operation::name)
        .def("__str__", &operation::to_string)
        .def("__repr__", [](const operation& op) { return "kiln.op(" + op.to_string() + ")"; })
        .def("__eq__", [](const operation& a, const operation& b) { return a == b; });
    m.def("op", [](const std::string& name, const py::kwargs& attributes) {
        value v = value::make_object();
        for (auto& [k, x] : attributes) v[k.cast<std::string>()] = value_from_python(x, "kiln.op('" + name + "')");
        return make_op_checked(name, v);
    }, py::arg("name"), "An operation by its IR name with attributes as keyword arguments, e.g. "
                        "kiln.op('convolution', padding=[1, 1, 1, 1], stride=[1, 1]). Unknown names and attributes "
                        "raise kiln.InvalidArgumentError.");

    py::class_<instruction_handle>(m, "instruction_ref", "An instruction of a module (what add_* return).")
        .def("shape", [](const instruction_handle& i) { return i.ins->get_shape(); })
        .def("name", [](const instruction_handle& i) { return i.ins->name(); })
        .def("__repr__", [](const instruction_handle& i) {
            return "kiln.instruction_ref(" + i.ins->name() + " -> " + i.ins->get_shape().to_string() + ")";
        });

    py::class_<module_handle>(m, "module", "A module of a program: its instructions, in order.")
        .def("add_parameter", [](module_handle& m, const std::string& name, const shape& s) {
            return instruction_handle{m.owner, m.mod, m.mod->add_parameter(name, s)};
        }, py::arg("name"), py::arg("shape"))
        .def("add_literal", [](module_handle& m, const py::object& data) {
            // A copy: the literal must not borrow the caller's numpy memory.
            return instruction_handle{m.owner, m.mod, m.mod->add_literal(literal(argument_from_python(data, "add_literal").copy()))};
        }, py::arg("data"), "A constant from a numpy array (copied).")
        .def("add_instruction", [](module_handle& m, const operation& op, const std::vector<instruction_handle>& args) {
            return instruction_handle{m.owner, m.mod, m.mod->add_instruction(op, refs(m, args, op.name()))};
        }, py::arg("op"), py::arg("args"), "Appends op applied to args; its shape is inferred (a wrong one raises).")
        .def("add_return", [](module_handle& m, const std::vector<instruction_handle>& args) {
            return instruction_handle{m.owner, m.mod, m.mod->add_return(refs(m, args, "add_return"))};
        }, py::arg("args"))
        .def("name", [](const module_handle& m) { return m.mod->name(); })
        .def("print", [](const module_handle& m) { py::print(m.mod->to_string()); })
        .def("__str__", [](const module_handle& m) { return m.mod->to_string(); });

    auto program_class = py::reinterpret_borrow<py::class_<program, program_ptr>>(py::type::of<program>());
    program_class.def(py::init<>(), "An empty program, to build with get_main_module().add_*.")
        .def("get_main_module", [](const program_ptr& p) { return module_handle{p, p->get_main_module()}; },
             "The main module, to add instructions to.");
}

}  // namespace kiln::python
