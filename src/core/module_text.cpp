// A recursive-descent reader for the text form (module_text.hpp). The text is split at
// its "module NAME" lines first, so a module can be read when an instruction first
// names it (If/Loop bodies come after main in print order but must exist before the
// instruction's shape can be computed).
#include "core/shape_parser.hpp"

#include <kiln/errors.hpp>
#include <kiln/module_text.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln {

namespace {

constexpr int max_nesting = 64;  // of attribute values, and of modules read from instructions

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }
// Instruction, parameter and module names: anything up to a separator of the syntax.
bool is_name_char(char c) {
    return !is_space(c) && c != '\n' && c != ',' && c != '(' && c != ')' && c != '[' && c != ']' && c != '{' &&
           c != '}' && c != '=';
}

struct module_block {
    std::string name;
    std::size_t header = 0;  // offset of the "module" line
    std::size_t begin = 0;   // first instruction line
    std::size_t end = 0;
};

// A cursor over the whole text (for line numbers) limited to one module's lines.
class reader {
public:
    reader(std::string_view text, std::size_t pos, std::size_t end) : text_(text), pos_(pos), end_(end) {}

    std::size_t pos() const { return pos_; }
    char char_at(std::size_t at) const { return at < end_ ? text_[at] : '\0'; }
    std::size_t line_of(std::size_t pos) const {
        return 1 + static_cast<std::size_t>(std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
    }

    // "line 7: expected ')' after the inputs, found ']'".
    [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
    [[noreturn]] void fail_at(std::size_t pos, const std::string& what) const {
        throw_error(error_code::parse, "line " + std::to_string(line_of(pos)) + ": " + what);
    }
    [[noreturn]] void expected(const std::string& what) const { fail("expected " + what + ", found " + found()); }

    std::string found() const {
        if (pos_ >= end_) return "the end of the module";
        if (text_[pos_] == '\n') return "the end of the line";
        auto stop = std::min(end_, text_.find('\n', pos_));
        auto n = std::min<std::size_t>(stop - pos_, 24);
        return "'" + std::string(text_.substr(pos_, n)) + (stop - pos_ > n ? "...'" : "'");
    }

    void skip_spaces() {
        while (pos_ < end_ && is_space(text_[pos_])) ++pos_;
    }
    // A `//` comment may end a line.
    bool at_line_end() {
        skip_spaces();
        if (text_.substr(pos_, 2) == "//" && pos_ + 2 <= end_) {
            auto nl = text_.find('\n', pos_);
            pos_ = nl == std::string_view::npos ? end_ : std::min(end_, nl);
        }
        return pos_ >= end_ || text_[pos_] == '\n';
    }
    void end_line(const std::string& after) {
        if (!at_line_end()) expected("the end of the line after " + after);
        if (pos_ < end_) ++pos_;
    }
    // Skips blank and `//` comment lines; false at the end of the module.
    bool next_line() {
        while (true) {
            skip_spaces();
            if (pos_ >= end_) return false;
            if (text_[pos_] == '\n') {
                ++pos_;
            } else if (text_.substr(pos_, 2) == "//") {
                auto nl = text_.find('\n', pos_);
                pos_ = nl == std::string_view::npos ? end_ : std::min(end_, nl);
            } else {
                return true;
            }
        }
    }
    bool peek(char c) {
        skip_spaces();
        return pos_ < end_ && text_[pos_] == c;
    }
    bool eat(std::string_view token) {
        skip_spaces();
        if (text_.substr(pos_, token.size()) != token || pos_ + token.size() > end_) return false;
        pos_ += token.size();
        return true;
    }
    void expect(std::string_view token, const std::string& where) {
        if (!eat(token)) expected("'" + std::string(token) + "' " + where);
    }
    std::string name(const std::string& what) {
        skip_spaces();
        auto b = pos_;
        while (pos_ < end_ && is_name_char(text_[pos_])) ++pos_;
        if (pos_ == b) expected(what);
        return std::string(text_.substr(b, pos_ - b));
    }
    // The rest of the line, for shapes (their own parser reports within it).
    std::string_view rest_of_line() const {
        auto nl = text_.find('\n', pos_);
        return text_.substr(pos_, std::min(end_, nl == std::string_view::npos ? text_.size() : nl) - pos_);
    }
    shape shape_here(const std::string& what) {
        skip_spaces();
        auto rest = rest_of_line();
        if (rest.empty()) expected(what);
        std::size_t used = 0;
        shape s;
        try {
            s = detail::parse_shape_prefix(rest, used);
        } catch (const error& e) {
            fail("expected " + what + ": " + e.message());
        }
        pos_ += used;
        return s;
    }
    // "-> shape" up to the end of the line.
    shape result_shape() {
        auto s = shape_here("a shape after '->'");
        end_line("the shape");
        return s;
    }

    // Attribute values as kiln::value prints them.
    value parse_value(int depth = 0) {
        if (depth > max_nesting) fail("attribute value nested too deeply");
        skip_spaces();
        if (pos_ >= end_) expected("a value");
        char c = text_[pos_];
        if (c == '"') return value(quoted_string());
        if (c == '[') {
            ++pos_;
            value::array a;
            if (!eat("]")) {
                do a.push_back(parse_value(depth + 1));
                while (eat(","));
                expect("]", "to close the list");
            }
            return value(std::move(a));
        }
        if (c == '{') {
            ++pos_;
            value::object o;
            if (!eat("}")) {
                do {
                    skip_spaces();
                    auto b = pos_;
                    while (pos_ < end_ && text_[pos_] != ':' && text_[pos_] != '\n' && text_[pos_] != ',' &&
                           text_[pos_] != '}')
                        ++pos_;
                    auto key = std::string(text_.substr(b, pos_ - b));
                    while (!key.empty() && is_space(key.back())) key.pop_back();
                    expect(":", "after the key '" + key + "'");
                    o.emplace_back(std::move(key), parse_value(depth + 1));
                } while (eat(","));
                expect("}", "to close the object");
            }
            return value(std::move(o));
        }
        if (c == '<') fail("a binary value printed only by its size (" + found() + ") cannot be read back");
        return scalar_value();
    }

    // std::quoted's form: backslash escapes the next character.
    std::string quoted_string() {
        auto start = pos_;
        ++pos_;
        std::string s;
        while (pos_ < end_ && text_[pos_] != '"') {
            if (text_[pos_] == '\\' && pos_ + 1 < end_) ++pos_;
            s += text_[pos_++];
        }
        if (pos_ >= end_) fail_at(start, "a string that does not end");
        ++pos_;
        return s;
    }

    // A word: null, true, false, a number (inf, nan), or 0x... bytes.
    std::string word() {
        skip_spaces();
        auto b = pos_;
        while (pos_ < end_ && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
                               text_[pos_] == '-' || text_[pos_] == '+' || text_[pos_] == '_'))
            ++pos_;
        return std::string(text_.substr(b, pos_ - b));
    }

    value scalar_value() {
        auto b = pos_;
        auto w = word();
        if (w.empty()) expected("a value");
        if (w == "null") return value();
        if (w == "true") return value(true);
        if (w == "false") return value(false);
        if (w.size() >= 2 && w[0] == '0' && w[1] == 'x') return value(value::binary{hex_bytes(b, w.substr(2))});
        if (auto v = number(w)) return *v;
        fail_at(b, "expected a value, found '" + w + "'");
    }

    std::string hex_bytes(std::size_t at, const std::string& hex) {
        if (hex.size() % 2) fail_at(at, "odd number of hex digits in 0x" + hex);
        std::string out;
        for (std::size_t i = 0; i < hex.size(); i += 2) {
            unsigned byte = 0;
            auto r = std::from_chars(hex.data() + i, hex.data() + i + 2, byte, 16);
            if (r.ec != std::errc() || r.ptr != hex.data() + i + 2) fail_at(at, "bad hex digits in 0x" + hex);
            out += static_cast<char>(byte);
        }
        return out;
    }

    // Integers stay exact (int64, or uint64 above its range); anything else is a double.
    static std::optional<value> number(const std::string& w) {
        const char* b = w.data();
        const char* e = w.data() + w.size();
        std::int64_t i = 0;
        // "-0" is a double's negative zero (value prints -0.0 so); as an integer it would lose its sign.
        if (auto r = std::from_chars(b, e, i); r.ec == std::errc() && r.ptr == e)
            return i == 0 && w[0] == '-' ? value(-0.0) : value(i);
        std::uint64_t u = 0;
        if (auto r = std::from_chars(b, e, u); r.ec == std::errc() && r.ptr == e) return value(u);
        double d = 0;
        if (auto r = std::from_chars(b, e, d); r.ec == std::errc() && r.ptr == e) return value(d);
        // glibc prints a negative NaN "-nan"; from_chars reads "-nan" too, but not "+inf".
        if (w == "+inf") return value(std::numeric_limits<double>::infinity());
        return std::nullopt;
    }

private:
    std::string_view text_;
    std::size_t pos_;
    std::size_t end_;
};

// One literal value as argument::to_string writes it, converted to the element type.
template <class C>
C element_from(reader& r, std::size_t at, const std::string& w) {
    if constexpr (std::is_same_v<C, bool>) {
        if (w == "true" || w == "1") return true;
        if (w == "false" || w == "0") return false;
        r.fail_at(at, "expected true or false, found '" + w + "'");
    } else {
        auto v = reader::number(w);
        if (!v) r.fail_at(at, "expected a number, found '" + w + "'");
        // Integer types take integers exactly (beyond a double's 53 bits); the others go
        // through double, which keeps -0 and every value a float type can hold.
        if constexpr (std::numeric_limits<C>::is_integer) {
            if (v->get_kind() == value::kind::int64) return convert<C>(v->get_int64());
            if (v->get_kind() == value::kind::uint64) return convert<C>(v->get_uint64());
        }
        return convert<C>(v->get_double());
    }
}

class module_reader {
public:
    module_reader(std::string_view text, const module_block& block, module& m, const text_parse_options& options,
                  std::function<module_ref(const std::string&, reader&)> find_module)
        : r_(text, block.begin, block.end), m_(m), options_(options), find_module_(std::move(find_module)) {}

    void read() {
        while (r_.next_line()) {
            if (returned_) r_.fail("nothing may follow the @return");
            instruction_line();
        }
    }

private:
    void instruction_line() {
        auto start = r_.pos();
        if (r_.eat("@return")) {
            auto args = r_.peek('(') ? inputs("@return") : std::vector<instruction_ref>{};
            r_.end_line("@return");
            m_.add_return(std::move(args));
            returned_ = true;
            return;
        }
        auto name = r_.name("an instruction name or @return");
        if (names_.count(name)) r_.fail_at(start, "'" + name + "' is defined twice");
        r_.expect("=", "after the name '" + name + "'");
        instruction_ref ins;
        if (r_.eat("@param")) {
            r_.expect("->", "and the shape of parameter " + name);
            auto s = r_.result_shape();
            if (m_.get_parameter(name) != m_.end()) r_.fail_at(start, "two parameters named '" + name + "'");
            ins = m_.add_parameter(name, s);
        } else if (r_.eat("@literal{")) {
            ins = literal_line(name, start);
        } else {
            ins = op_line(start);
        }
        names_.emplace(name, ins);
    }

    instruction_ref literal_line(const std::string& name, std::size_t start) {
        auto s = r_.shape_here("the literal's shape");
        if (!s.is_tensor() || s.dynamic()) r_.fail_at(start, "a literal needs a static tensor shape, not " + s.to_string());
        bool no_data = r_.eat("<no data>");
        if (no_data && s != shape()) r_.fail_at(start, "only an empty float32[] literal has no data");
        literal_words words;
        if (!no_data) {
            r_.expect("{", "before the literal's values");
            words = literal_values();
        }
        r_.expect("}", "to close @literal{");
        if (r_.eat("->")) {
            auto rs = r_.result_shape();
            if (rs != s) r_.fail_at(start, "literal " + name + " of shape " + s.to_string() + " says -> " + rs.to_string());
        } else {
            r_.end_line("the literal");
        }
        std::optional<literal> given;
        if (options_.literals) given = options_.literals(literal_ref{m_.name(), name, m_.size(), s, words.elided});
        if (given) {
            if (given->get_shape() != s)
                r_.fail_at(start, "the literal source gives " + given->get_shape().to_string() + " for " + name +
                                      ", the text says " + s.to_string());
            return m_.add_literal(std::move(*given));
        }
        if (no_data) return m_.add_literal(literal());
        if (words.elided)
            r_.fail_at(start, "the values of literal " + name +
                                  " are elided ('...'): give them through text_parse_options::literals");
        return m_.add_literal(literal_from_words(s, name, start, words.items));
    }

    struct literal_words {
        std::vector<std::pair<std::size_t, std::string>> items;  // (offset, text)
        bool elided = false;
    };
    // "1, 2, ...}" after the '{'.
    literal_words literal_values() {
        literal_words words;
        if (r_.eat("}")) return words;
        do {
            if (r_.eat("...")) {
                words.elided = true;
                break;
            }
            r_.skip_spaces();
            auto at = r_.pos();
            if (r_.peek('"')) words.items.emplace_back(at, r_.quoted_string());
            else words.items.emplace_back(at, r_.word());
            if (words.items.back().second.empty() && text_at(at) != '"') r_.expected("a literal value");
        } while (r_.eat(","));
        r_.expect("}", "after the literal's values");
        return words;
    }
    char text_at(std::size_t at) const { return r_.char_at(at); }

    literal literal_from_words(const shape& s, const std::string& name, std::size_t start,
                               const std::vector<std::pair<std::size_t, std::string>>& items) {
        if (items.size() != s.elements())
            r_.fail_at(start, "literal " + name + " of shape " + s.to_string() + " needs " +
                                  std::to_string(s.elements()) + " values, the text has " + std::to_string(items.size()));
        if (!s.standard()) r_.fail_at(start, "a literal with strides needs its values from a literal source");
        return visit_type(s.get_type(), [&](auto tag) {
            using C = typename decltype(tag)::type;
            if constexpr (std::is_same_v<C, std::string>) {
                std::vector<std::string> v;
                for (auto& [at, w] : items) v.push_back(w);
                return literal(s, v);
            } else {
                std::vector<C> v;
                for (auto& [at, w] : items) v.push_back(element_from<C>(r_, at, w));
                return literal(s, v);
            }
        });
    }

    instruction_ref op_line(std::size_t start) {
        auto op_name = r_.name("an op name, @param or @literal");
        value attrs = r_.peek('{') ? op_attributes(op_name) : value::make_object();
        auto args = r_.peek('(') ? inputs(op_name) : std::vector<instruction_ref>{};
        std::vector<module_ref> mods;
        if (r_.eat("[")) {
            do mods.push_back(find_module_(r_.name("a module name"), r_));
            while (r_.eat(","));
            r_.expect("]", "after the modules of " + op_name);
        }
        std::optional<shape> written;
        if (r_.eat("->")) written = r_.result_shape();
        else r_.end_line(op_name);

        operation op;
        shape computed;
        try {
            op = make_op(op_name, attrs);
            check_attribute_names(op, attrs);
            computed = op.compute_shape(to_shapes(args), mods);
        } catch (const error& e) {
            throw_error(e.code(), "line " + std::to_string(r_.line_of(start)) + ": " + e.message());
        } catch (const std::exception& e) {
            // A shape function failing another way (.at() on a bad input count) is still bad text.
            r_.fail_at(start, op_name + ": " + e.what());
        }
        if (written && *written != computed)
            r_.fail_at(start, op_name + " gives " + computed.to_string() + ", the text says " + written->to_string());
        // The written shape is kept whole: it may carry values (int64[2]<batch, 4>) that
        // equality ignores, and it is what printing the module must give back. Print
        // leaves out values that are all numbers (int64[2] for shape_of of a float32[2, 3]),
        // so a written shape without values takes the computed ones: they print the same,
        // and the ops after it (a reshape to those values) read them as they did before.
        const bool keep_written = written && (written->has_values() || !computed.has_values());
        return m_.insert_instruction_with_shape(m_.end(), op, keep_written ? *written : computed, std::move(args),
                                                std::move(mods));
    }

    // "{axis=1, perm=[1, 0]}" as operator<<(operation) writes it.
    value op_attributes(const std::string& op_name) {
        r_.expect("{", "before the attributes of " + op_name);
        value attrs = value::make_object();
        if (r_.eat("}")) return attrs;
        do {
            auto key = r_.name("an attribute name of " + op_name);
            r_.expect("=", "after the attribute name '" + key + "'");
            if (attrs.contains(key)) r_.fail("attribute '" + key + "' given twice");
            attrs[key] = r_.parse_value();
        } while (r_.eat(","));
        r_.expect("}", "after the attributes of " + op_name);
        return attrs;
    }

    // make_op ignores unknown keys (old files load with new attributes); text is written
    // by hand, where an unknown key is a typo.
    static void check_attribute_names(const operation& op, const value& attrs) {
        auto known = op.to_value();
        for (auto& [key, v] : attrs.get_object())
            if (!known.contains(key)) {
                std::string list;
                if (known.is_object())
                    for (auto& [k, x] : known.get_object()) list += (list.empty() ? "" : ", ") + k;
                throw_error(error_code::parse, op.name() + " has no attribute '" + key + "' (it has: " +
                                                   (list.empty() ? "none" : list) + ")");
            }
    }

    std::vector<instruction_ref> inputs(const std::string& op_name) {
        r_.expect("(", "before the inputs of " + op_name);
        std::vector<instruction_ref> args;
        if (r_.eat(")")) return args;
        do {
            r_.skip_spaces();
            auto at = r_.pos();
            auto n = r_.name("an input name");
            auto it = names_.find(n);
            if (it == names_.end()) r_.fail_at(at, "'" + n + "' is not defined before it is used");
            args.push_back(it->second);
        } while (r_.eat(","));
        r_.expect(")", "after the inputs of " + op_name);
        return args;
    }

    reader r_;
    module& m_;
    const text_parse_options& options_;
    std::function<module_ref(const std::string&, reader&)> find_module_;
    std::unordered_map<std::string, instruction_ref> names_;
    bool returned_ = false;
};

// The "module NAME" lines: each starts a block that runs to the next one.
std::vector<module_block> split_modules(std::string_view text) {
    std::vector<module_block> blocks;
    std::size_t pos = 0;
    while (pos < text.size()) {
        auto nl = text.find('\n', pos);
        auto line_end = nl == std::string_view::npos ? text.size() : nl;
        reader r(text, pos, line_end);
        // "module main", not an instruction named "module" or "modules".
        if (r.eat("module ") && !r.peek('=')) {
            if (!blocks.empty()) blocks.back().end = pos;
            module_block b;
            b.header = pos;
            b.name = r.name("a module name after 'module'");
            r.end_line("the module's name");
            b.begin = std::min(line_end + 1, text.size());
            blocks.push_back(std::move(b));
        } else if (blocks.empty() && r.next_line()) {
            r.expected("'module NAME' before the instructions");
        }
        pos = line_end + 1;
    }
    if (blocks.empty()) throw_error(error_code::parse, "no 'module NAME' line in the text");
    blocks.back().end = text.size();
    return blocks;
}

}  // namespace

std::unique_ptr<module> parse_module(std::string_view text, const text_parse_options& options) {
    auto blocks = split_modules(text);
    if (blocks.size() > 1)
        reader(text, blocks[1].header, text.size())
            .fail("a second module: read a program's modules with parse_program");
    auto m = std::make_unique<module>(blocks[0].name);
    module_reader(text, blocks[0], *m, options, [](const std::string& name, reader& r) -> module_ref {
        r.fail("sub-module '" + name + "': read a program's modules with parse_program");
    }).read();
    return m;
}

program parse_program(std::string_view text, const text_parse_options& options) {
    auto blocks = split_modules(text);
    program p;
    auto* main = p.get_main_module();
    if (blocks[0].name != main->name())
        reader(text, blocks[0].header, text.size()).fail("a program's first module is '" + main->name() + "'");
    enum class state { unread, reading, read };
    std::unordered_map<std::string, std::pair<const module_block*, state>> by_name;
    for (auto& b : blocks) {
        if (!by_name.emplace(b.name, std::pair{&b, state::unread}).second)
            reader(text, b.header, text.size()).fail("a second module named '" + b.name + "'");
        if (&b != &blocks[0]) p.create_module(b.name);
    }
    int depth = 0;
    std::function<void(const std::string&)> read;
    // A module is read when first referred to, so its instructions' shapes exist for the
    // If/Loop that uses it.
    auto find = [&](const std::string& name, reader& r) -> module_ref {
        auto it = by_name.find(name);
        if (it == by_name.end()) r.fail("no module named '" + name + "'");
        if (it->second.second == state::reading) r.fail("module '" + name + "' refers to itself");
        if (it->second.second == state::unread) {
            if (++depth > max_nesting) r.fail("modules nested too deeply");
            read(name);
            --depth;
        }
        return p.get_module(name);
    };
    read = [&](const std::string& name) {
        auto& [block, st] = by_name.at(name);
        st = state::reading;
        module_reader(text, *block, *p.get_module(name), options, find).read();
        st = state::read;
    };
    for (auto& b : blocks)
        if (by_name.at(b.name).second == state::unread) read(b.name);
    return p;
}

literal_source literals_of(const program& p) {
    std::map<std::pair<std::string, std::size_t>, literal> all;
    for (auto m : p.get_modules()) {
        std::size_t i = 0;
        for (auto& ins : *m) {
            if (ins.is_literal()) all.emplace(std::pair{m->name(), i}, ins.get_literal());
            ++i;
        }
    }
    return [all = std::move(all)](const literal_ref& ref) -> std::optional<literal> {
        auto it = all.find({ref.module, ref.index});
        if (it == all.end()) return std::nullopt;
        return it->second;
    };
}

literal_source literals_by_name(std::map<std::string, literal> named) {
    return [named = std::move(named)](const literal_ref& ref) -> std::optional<literal> {
        auto it = named.find(ref.name);
        if (it == named.end()) return std::nullopt;
        return it->second;
    };
}

}  // namespace kiln
