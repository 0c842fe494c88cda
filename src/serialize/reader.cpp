// payload -> program. The payload's checksum matched, but the bytes may still be
// crafted: every index, name, size and shape is checked before it is used, and the
// finished modules are validated. Errors name the module and instruction.
#include "serialize/msgpack_codec.hpp"
#include "serialize/payload.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>
#include <kiln/target.hpp>

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace kiln::kiln_file {

namespace {

[[noreturn]] void fail(const std::string& what) { throw_error(error_code::parse, what); }

// Rethrows the exception in flight with `where` in front. A well-formed file that
// needs what this build lacks stays `unsupported`; running out of memory and I/O keep
// their codes; anything else means the bytes are wrong: `parse`.
[[noreturn]] void rethrow_in(const std::string& where) {
    try {
        throw;
    } catch (const error& e) {
        auto code = e.code();
        if (code != error_code::unsupported && code != error_code::out_of_memory && code != error_code::io)
            code = error_code::parse;
        throw_error(code, where + ": " + e.message());
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {
        throw_error(error_code::parse, where + ": " + e.what());
    }
}

shape read_shape(const msgpack::object& o, std::string_view what) {
    return shape_from_value(value(std::string(as_string(o, what))));
}

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

literal read_literal(const msgpack::object& o, const std::shared_ptr<char>& keep_alive) {
    shape s = read_shape(get_key(o, "shape", "literal"), "literal shape");
    if (!s.is_tensor() || s.dynamic()) fail("a literal needs a static tensor shape, got " + s.to_string());
    const auto* data = find_key(o, "data");
    const auto* strings = find_key(o, "strings");
    if (data == nullptr && strings == nullptr) {
        // What the writer stores for a default-constructed (empty) literal.
        if (s == literal{}.get_shape()) return literal{};
        fail("literal " + s.to_string() + " has no data");
    }
    if (s.get_type() == type::string) {
        if (strings == nullptr) fail("string literal " + s.to_string() + " has no 'strings'");
        const auto& a = as_array(*strings, "literal strings");
        if (a.size != s.element_space())
            fail("string literal " + s.to_string() + " needs " + std::to_string(s.element_space()) + " strings, has " +
                 std::to_string(a.size));
        std::vector<std::string> v;
        v.reserve(a.size);
        for (std::uint32_t i = 0; i < a.size; ++i) v.emplace_back(as_string(a.ptr[i], "a literal string"));
        return literal(s, static_cast<const void*>(v.data()));
    }
    if (data == nullptr) fail("literal " + s.to_string() + " has no 'data'");
    const auto& bin = as_binary(*data, "literal data");
    if (bin.size != s.bytes())
        fail("literal " + s.to_string() + " needs " + std::to_string(s.bytes()) + " bytes, the file has " +
             std::to_string(bin.size));
    if (s.get_type() == type::bool_ &&
        std::any_of(bin.ptr, bin.ptr + bin.size, [](char c) { return static_cast<unsigned char>(c) > 1; }))
        fail("bool literal " + s.to_string() + " holds a byte that is neither 0 nor 1");
    if (bin.size == 0 || !s.standard()) return literal(s, bin.ptr);  // keeps a strided layout as it is
    const bool aligned = reinterpret_cast<std::uintptr_t>(bin.ptr) % literal_alignment == 0;
    if (keep_alive && aligned) {
        // Shares the load buffer: no copy of the (possibly huge) weights.
        return literal(argument(s, std::shared_ptr<char>(keep_alive, const_cast<char*>(bin.ptr))));
    }
    // One copy into aligned memory (literal(s, ptr) would zero-fill it first).
    auto buffer = allocate_aligned(bin.size);
    std::memcpy(buffer.get(), bin.ptr, bin.size);
    return literal(argument(s, std::move(buffer)));
}

std::vector<module_ref> sub_modules(const module& m) {
    std::vector<module_ref> out;
    for (const auto& ins : m)
        for (auto sub : ins.module_inputs())
            if (std::find(out.begin(), out.end(), sub) == out.end()) out.push_back(sub);
    return out;
}

// Control flow recurses into sub-modules at eval: refuse cycles and deep nesting.
void check_module_graph(const std::vector<module_ref>& modules) {
    std::unordered_map<module_ref, std::vector<module_ref>> children;
    for (auto m : modules) children.emplace(m, sub_modules(*m));
    enum class mark : std::uint8_t { none, open, done };
    std::unordered_map<module_ref, mark> marks;
    std::unordered_map<module_ref, std::size_t> height;
    struct frame {
        module_ref m;
        std::size_t next;
    };
    for (auto root : modules) {
        if (marks[root] == mark::done) continue;
        std::vector<frame> stack{{root, 0}};
        marks[root] = mark::open;
        while (!stack.empty()) {
            const module_ref m = stack.back().m;
            const auto& ch = children.at(m);
            if (stack.back().next < ch.size()) {
                const module_ref c = ch[stack.back().next++];
                if (marks[c] == mark::open)
                    fail("module " + in_quotes(c->name()) + " contains itself (through " + in_quotes(m->name()) + ")");
                if (marks[c] == mark::none) {
                    marks[c] = mark::open;
                    stack.push_back({c, 0});
                }
                continue;
            }
            std::size_t h = 0;
            for (auto c : ch) h = std::max(h, height.at(c) + 1);
            if (h > max_module_nesting)
                fail("module " + in_quotes(m->name()) + " nests sub-modules more than " +
                     std::to_string(max_module_nesting) + " deep");
            height[m] = h;
            marks[m] = mark::done;
            stack.pop_back();
        }
    }
}

class payload_reader {
public:
    explicit payload_reader(const std::shared_ptr<char>& keep_alive) : keep_alive_(keep_alive) {}

    void read_modules(program& p, const msgpack::object_array& list) {
        if (list.size == 0) fail("the payload has no modules");
        std::vector<module_ref> modules;
        for (std::uint32_t i = 0; i < list.size; ++i) {
            const auto& mo = list.ptr[i];
            std::string name(as_string(get_key(mo, "name", "a module"), "a module name"));
            module_ref m;
            if (i == 0) {
                if (name != p.get_main_module()->name())
                    fail("the first module must be the main module " + in_quotes(p.get_main_module()->name()) + ", got " +
                         in_quotes(name));
                m = p.get_main_module();
            } else {
                if (by_name_.count(name) > 0) fail("two modules are named " + in_quotes(name));
                m = p.create_module(name);
            }
            by_name_.emplace(name, m);
            modules.push_back(m);
        }
        // All modules exist before any instruction refers to one.
        for (std::uint32_t i = 0; i < list.size; ++i) {
            const auto& mo = list.ptr[i];
            read_instructions(*modules[i], as_array(get_key(mo, "instructions", "a module"), "instructions"));
        }
        check_module_graph(modules);
        for (auto m : modules) {
            try {
                m->validate();
            } catch (...) {
                rethrow_in("module " + in_quotes(m->name()));
            }
        }
    }

    literal read_literal(const msgpack::object& o) const { return kiln_file::read_literal(o, keep_alive_); }

private:
    void read_instructions(module& m, const msgpack::object_array& list) {
        std::vector<instruction_ref> refs;
        refs.reserve(list.size);
        for (std::uint32_t j = 0; j < list.size; ++j) {
            std::string where = "module " + in_quotes(m.name()) + ", instruction " + std::to_string(j);
            try {
                const auto& o = list.ptr[j];
                std::string name(as_string(get_key(o, "op", "an instruction"), "op"));
                where += " (" + name + ")";
                refs.push_back(read_instruction(m, o, name, refs));
            } catch (...) {
                rethrow_in(where);
            }
        }
    }

    instruction_ref read_instruction(module& m, const msgpack::object& o, const std::string& name,
                                     const std::vector<instruction_ref>& earlier) {
        std::vector<instruction_ref> args;
        if (const auto* in = find_key(o, "inputs")) {
            const auto& a = as_array(*in, "inputs");
            for (std::uint32_t k = 0; k < a.size; ++k) {
                auto idx = as_uint(a.ptr[k], "an input index");
                if (idx >= earlier.size())
                    fail("input " + std::to_string(k) + " refers to instruction " + std::to_string(idx) +
                         ", which does not come before it");
                args.push_back(earlier[idx]);
            }
        }
        std::vector<module_ref> mods;
        if (const auto* ms = find_key(o, "modules")) {
            const auto& a = as_array(*ms, "modules");
            for (std::uint32_t k = 0; k < a.size; ++k) {
                std::string sub(as_string(a.ptr[k], "a module name"));
                auto it = by_name_.find(sub);
                if (it == by_name_.end()) fail("uses module " + in_quotes(sub) + ", which the file does not contain");
                mods.push_back(it->second);
            }
        }
        shape s = read_shape(get_key(o, "shape", "an instruction"), "shape");
        if (name == "@literal") {
            if (!args.empty() || !mods.empty()) fail("a literal has no inputs");
            literal l = read_literal(get_key(o, "literal", "a literal instruction"));
            if (l.get_shape() != s)
                fail("the literal's shape " + l.get_shape().to_string() + " differs from the instruction's " +
                     s.to_string());
            return m.insert_literal(m.end(), std::move(l));
        }
        value attributes = value::make_object();
        if (const auto* a = find_key(o, "attributes")) {
            attributes = to_value(*a);
            if (!attributes.is_object()) fail("attributes must be a map, got " + attributes.to_string());
        }
        operation op = make_op(name, attributes);
        return m.insert_instruction_with_shape(m.end(), op, std::move(s), std::move(args), std::move(mods));
    }

    std::shared_ptr<char> keep_alive_;
    std::unordered_map<std::string, module_ref> by_name_;
};

// Whether `given` may stand for a parameter declared as `declared`.
bool fits(const shape& declared, const shape& given) {
    if (!declared.is_tensor()) return declared == given;
    if (!given.is_tensor() || given.get_type() != declared.get_type()) return false;
    if (!declared.dynamic()) return declared.lens() == given.lens();
    const auto& dims = declared.dyn_dims();
    const auto& lens = given.lens();
    if (dims.size() != lens.size()) return false;
    for (std::size_t i = 0; i < dims.size(); ++i)
        if (!dims[i].contains(lens[i])) return false;
    return true;
}

void read_defaults(program& p, const msgpack::object& list, const payload_reader& reader) {
    const auto& a = as_array(list, "parameter_defaults");
    auto* main = p.get_main_module();
    for (std::uint32_t i = 0; i < a.size; ++i) {
        std::string name(as_string(get_key(a.ptr[i], "name", "a parameter default"), "a parameter name"));
        try {
            auto param = main->get_parameter(name);
            if (param == main->end()) fail("the main module has no such parameter");
            literal l = reader.read_literal(get_key(a.ptr[i], "literal", "a parameter default"));
            // eval passes defaults to the ops unchecked: a wrong shape must stop here.
            if (l.empty() || !fits(param->get_shape(), l.get_shape()))
                fail("the default " + l.get_shape().to_string() + " does not fit the parameter's shape " +
                     param->get_shape().to_string());
            p.set_parameter_default(name, std::move(l));
        } catch (...) {
            rethrow_in("default of parameter " + in_quotes(name));
        }
    }
}

bool has_dynamic_inputs(const module& m) {
    return std::any_of(m.begin(), m.end(), [](const instruction& ins) {
        return ins.is_param() && ins.get_shape().is_tensor() && ins.get_shape().dynamic();
    });
}

program read_program(const msgpack::object& root, std::uint64_t version, const std::shared_ptr<char>& keep_alive,
                     const load_options& opts, std::size_t depth);

// The programs a dynamic program compiled ahead for its optimals, as saved beside it
// (each a payload of its own); loading them saves compiling them again.
std::vector<program> read_ahead(const msgpack::object& list, std::uint64_t version,
                                const std::shared_ptr<char>& keep_alive, const load_options& opts, std::size_t depth) {
    const auto& a = as_array(list, "ahead");
    std::vector<program> out;
    for (std::uint32_t i = 0; i < a.size; ++i) {
        try {
            expect_map(a.ptr[i], "a program compiled ahead");
            auto p = read_program(a.ptr[i], version, keep_alive, opts, depth + 1);
            if (!p.is_compiled()) fail("it is not compiled");
            out.push_back(std::move(p));
        } catch (...) {
            rethrow_in("program compiled ahead " + std::to_string(i));
        }
    }
    return out;
}

// The target a compiled program names, which must run here (loading is for running).
std::shared_ptr<const target> target_to_run(const std::string& name) {
    std::shared_ptr<const target> t;
    try {
        t = get_target(name);
    } catch (const error& e) {
        throw_error(error_code::unsupported,
                    "the program was compiled for target " + in_quotes(name) + ", which this build lacks: " + e.message());
    }
    if (auto why = t->unavailable_reason(); !why.empty())
        throw_error(error_code::unsupported, "the program was compiled for target " + in_quotes(name) +
                                                 ", which is not available here: " + why);
    return t;
}

// `t`: the target the program names (target_to_run), resolved before its modules were read.
void restore_compiled_state(program& p, const msgpack::object& c, const target& t, const load_options& opts,
                            std::uint64_t version, const std::shared_ptr<char>& keep_alive, std::size_t depth) {
    bool dynamic = false;
    if (const auto* d = find_key(c, "dynamic")) dynamic = as_bool(*d, "dynamic");
    compile_options options;
    if (const auto* o = find_key(c, "options")) {
        value v = to_value(*o);
        if (!v.is_object()) fail("compile options must be a map");
        // Unknown options (from a newer writer) are ignored; missing ones keep defaults.
        for_each_option(options, [&](auto& field, const char* key) {
            if (const auto* x = v.find(key)) {
                try {
                    from_value(*x, field);
                } catch (...) {
                    rethrow_in(std::string("compile option ") + key);
                }
            }
        });
    }
    if (opts.device_id) options.device_id = *opts.device_id;

    try {
        if (dynamic) {
            // A dynamic program is saved as parsed: compile() builds its generic program
            // from it and keeps it to specialize from, exactly as before saving.
            if (!has_dynamic_inputs(*p.get_main_module()))
                fail("marked dynamic, but the main module has no dynamic inputs");
            if (const auto* ahead = find_key(c, "ahead")) {
                // A program compiled ahead is static, or dynamic without programs of its own.
                if (depth >= 1) fail("a program compiled ahead has programs compiled ahead");
                p.restore_dynamic(t, options, read_ahead(*ahead, version, keep_alive, opts, depth));
            } else {
                p.compile(t, options);  // written before programs compiled ahead were saved
            }
            if (p.dynamic_source() == nullptr) fail("did not become a dynamic program");
        } else {
            p.restore_compiled(t, options);
        }
    } catch (...) {
        rethrow_in("restoring the program compiled for " + in_quotes(t.name()));
    }
}

program read_program(const msgpack::object& root, std::uint64_t version, const std::shared_ptr<char>& keep_alive,
                     const load_options& opts, std::size_t depth) {
    expect_map(root, "the payload");
    auto own = as_uint(get_key(root, "format_version", "the payload"), "format_version");
    if (own != version)
        fail("the payload's format version " + std::to_string(own) + " differs from the header's " +
             std::to_string(version));

    const auto* compiled = find_key(root, "compiled");
    const bool is_compiled = compiled != nullptr && compiled->type != msgpack::type::NIL;
    // The target before the modules: one built as a module of its own (gpu) registers its
    // operations when it is loaded, and the modules name them.
    std::shared_ptr<const target> t;
    if (is_compiled) {
        expect_map(*compiled, "compiled");
        t = target_to_run(std::string(as_string(get_key(*compiled, "target", "compiled"), "target")));
    }
    program p;
    payload_reader reader(keep_alive);
    reader.read_modules(p, as_array(get_key(root, "modules", "the payload"), "modules"));
    if (const auto* md = find_key(root, "metadata")) {
        try {
            p.set_metadata(to_value(*md));
        } catch (...) {
            rethrow_in("metadata");
        }
    }
    if (const auto* names = find_key(root, "output_names")) {
        const auto& a = as_array(*names, "output_names");
        std::vector<std::string> v;
        for (std::uint32_t i = 0; i < a.size; ++i) v.emplace_back(as_string(a.ptr[i], "an output name"));
        p.set_output_names(std::move(v));
    }
    if (const auto* d = find_key(root, "parameter_defaults")) read_defaults(p, *d, reader);

    if (is_compiled) restore_compiled_state(p, *compiled, *t, opts, version, keep_alive, depth);
    return p;
}

}  // namespace

program read_payload(const char* data, std::size_t size, const file_header& h, const std::shared_ptr<char>& keep_alive,
                     const load_options& opts) {
    auto handle = unpack_checked(data, size);
    const msgpack::object& root = handle.get();
    expect_map(root, "the payload");
    const auto* compiled = find_key(root, "compiled");
    const bool is_compiled = compiled != nullptr && compiled->type != msgpack::type::NIL;
    if (is_compiled != ((h.flags & flag_compiled) != 0))
        fail(std::string("the header says the program is ") + (is_compiled ? "not " : "") +
             "compiled, the payload says it is" + (is_compiled ? "" : " not"));
    return read_program(root, h.version, keep_alive, opts, 0);
}

}  // namespace kiln::kiln_file
