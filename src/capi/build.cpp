// Building a program by hand: kiln_program_create, its main module, add_parameter / literal /
// instruction / return. Op attributes come as a JSON object (nlohmann's parser) turned into
// kiln::value, and go through make_op_checked, so a misspelt attribute is an error.
#include "handles.hpp"

#include <kiln/literal.hpp>
#include <kiln/register_op.hpp>

#include <nlohmann/json.hpp>

using namespace kiln::capi;
using kiln::error_code;
using kiln::throw_error;

namespace {

kiln::value value_of_json(const nlohmann::json& j) {
    switch (j.type()) {
        case nlohmann::json::value_t::null: return {};
        case nlohmann::json::value_t::boolean: return kiln::value(j.get<bool>());
        case nlohmann::json::value_t::number_integer: return kiln::value(j.get<std::int64_t>());
        case nlohmann::json::value_t::number_unsigned: return kiln::value(j.get<std::uint64_t>());
        case nlohmann::json::value_t::number_float: return kiln::value(j.get<double>());
        case nlohmann::json::value_t::string: return kiln::value(j.get<std::string>());
        case nlohmann::json::value_t::array: {
            kiln::value v = kiln::value::make_array();
            for (const auto& x : j) v.push_back(value_of_json(x));
            return v;
        }
        case nlohmann::json::value_t::object: {
            kiln::value v = kiln::value::make_object();
            for (const auto& [k, x] : j.items()) v[k] = value_of_json(x);
            return v;
        }
        default: break;
    }
    throw_error(error_code::invalid_argument, "attributes_json: unsupported JSON value");
}

kiln::value attributes_of(const char* op_name, const char* json) {
    if (json == nullptr || *json == '\0') return kiln::value::make_object();
    auto parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded())
        throw_error(error_code::invalid_argument, std::string("attributes_json of '") + op_name + "' is not valid JSON");
    if (!parsed.is_object())
        throw_error(error_code::invalid_argument,
                    std::string("attributes_json of '") + op_name + "' must be a JSON object {\"name\": value}");
    return value_of_json(parsed);
}

// The module's program must still be open for changes.
kiln_module_t& open_module(kiln_module module) {
    auto& m = get(module, "module");
    if (m.owner->program->is_compiled())
        throw_error(error_code::invalid_argument, "the program is compiled; build a new one to change it");
    return m;
}

std::vector<kiln::instruction_ref> refs_of(const kiln_module_t& m, const kiln_instruction* inputs, size_t count) {
    if (count > 0) need(inputs, "inputs");
    std::vector<kiln::instruction_ref> out;
    for (size_t i = 0; i < count; ++i) {
        auto& ins = get(inputs[i], "inputs[i]");
        if (ins.module != &m)
            throw_error(error_code::invalid_argument, "inputs[" + std::to_string(i) + "] belongs to another module");
        out.push_back(ins.ins);
    }
    return out;
}

kiln_instruction remember(kiln_module_t& m, kiln::instruction_ref ins) {
    auto& p = *m.owner;
    p.instructions.emplace_back();
    auto& h = p.instructions.back();
    h.module = &m;
    h.ins = ins;
    // Parameters and outputs changed: the getters read these.
    p.inputs = p.program->get_parameter_names();
    p.outputs = p.program->get_output_names();
    return &h;
}

}  // namespace

kiln_status kiln_program_create(kiln_program* out) {
    return guarded(__func__, [&] {
        auto& result = *need(out, "out");  // checked first: the right side of = runs before the left
        result = new_program(kiln::program{});
    });
}

kiln_status kiln_program_get_main_module(kiln_program program, kiln_module* out) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        need(out, "out");
        if (!p.main_module) {
            auto m = std::make_unique<kiln_module_t>();
            m->owner = &p;
            m->mod = p.program->get_main_module();
            p.main_module = std::move(m);
        }
        *out = p.main_module.get();
    });
}

kiln_status kiln_module_add_parameter(kiln_module module, const char* name, kiln_shape shape, kiln_instruction* out) {
    return guarded(__func__, [&] {
        auto& m = open_module(module);
        auto& s = get(shape, "shape");
        need(name, "name"), need(out, "out");
        *out = remember(m, m.mod->add_parameter(name, s.shape));
    });
}

kiln_status kiln_module_add_literal(kiln_module module, kiln_argument value, kiln_instruction* out) {
    return guarded(__func__, [&] {
        auto& m = open_module(module);
        auto& a = get(value, "value");
        need(out, "out");
        // A copy: the caller may free or reuse a wrapped buffer at once.
        *out = remember(m, m.mod->add_literal(kiln::literal(a.argument.copy())));
    });
}

kiln_status kiln_module_add_instruction(kiln_module module, const char* op_name, const char* attributes_json,
                                        const kiln_instruction* inputs, size_t input_count, kiln_instruction* out) {
    return guarded(__func__, [&] {
        auto& m = open_module(module);
        need(op_name, "op_name"), need(out, "out");
        auto op = kiln::make_op_checked(op_name, attributes_of(op_name, attributes_json));
        *out = remember(m, m.mod->add_instruction(op, refs_of(m, inputs, input_count)));
    });
}

kiln_status kiln_module_add_return(kiln_module module, const kiln_instruction* inputs, size_t input_count) {
    return guarded(__func__, [&] {
        auto& m = open_module(module);
        remember(m, m.mod->add_return(refs_of(m, inputs, input_count)));
    });
}

kiln_status kiln_module_to_string(kiln_module module, const char** text) {
    return guarded(__func__, [&] {
        auto& m = get(module, "module");
        need(text, "text");
        m.text = m.mod->to_string();
        *text = m.text.c_str();
    });
}

kiln_status kiln_instruction_shape(kiln_instruction instruction, kiln_shape* out) {
    return guarded(__func__, [&] {
        auto& i = get(instruction, "instruction");
        auto& result = *need(out, "out");  // checked first: the right side of = runs before the left
        result = new_shape(i.ins->get_shape());
    });
}
