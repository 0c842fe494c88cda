#include <kiln/errors.hpp>
#include <kiln/value.hpp>

#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <ostream>
#include <sstream>

namespace kiln {

namespace {
// Binary values up to this size print as hex ("0x0000803f"), larger ones as "<N bytes>".
constexpr std::size_t max_printed_binary_bytes = 32;

[[noreturn]] void wrong_kind(value::kind want, value::kind got) {
    throw_error(error_code::parse, "expected a value of kind " + std::string(kind_name(want)) + ", got " +
                                       std::string(kind_name(got)));
}
}  // namespace

std::string_view kind_name(value::kind k) {
    switch (k) {
        case value::kind::null: return "null";
        case value::kind::boolean: return "bool";
        case value::kind::int64: return "int64";
        case value::kind::uint64: return "uint64";
        case value::kind::float64: return "float64";
        case value::kind::string: return "string";
        case value::kind::binary: return "binary";
        case value::kind::array: return "array";
        case value::kind::object: return "object";
    }
    return "?";
}

value::value(std::initializer_list<value> items) {
    bool pairs = items.size() > 0;
    for (auto& i : items)
        if (!(i.is_array() && i.size() == 2 && i.get_array()[0].is_string())) pairs = false;
    if (pairs) {
        object o;
        for (auto& i : items) o.emplace_back(i.get_array()[0].get_string(), i.get_array()[1]);
        v_ = std::move(o);
    } else {
        v_ = array(items);
    }
}

bool value::get_bool() const {
    if (is_bool()) return std::get<bool>(v_);
    if (is_integer()) return get_int64() != 0;
    wrong_kind(kind::boolean, get_kind());
}

std::int64_t value::get_int64() const {
    switch (get_kind()) {
        case kind::int64: return std::get<std::int64_t>(v_);
        case kind::uint64: {
            auto u = std::get<std::uint64_t>(v_);
            if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                throw_error(error_code::parse, "integer " + std::to_string(u) + " does not fit int64");
            return static_cast<std::int64_t>(u);
        }
        case kind::boolean: return std::get<bool>(v_) ? 1 : 0;
        case kind::float64: {
            double d = std::get<double>(v_);
            if (!(d >= -9.2e18 && d <= 9.2e18) || d != std::floor(d))
                throw_error(error_code::parse, "number " + to_string() + " is not an integer");
            return static_cast<std::int64_t>(d);
        }
        default: wrong_kind(kind::int64, get_kind());
    }
}

std::uint64_t value::get_uint64() const {
    if (get_kind() == kind::uint64) return std::get<std::uint64_t>(v_);
    auto i = get_int64();
    if (i < 0) throw_error(error_code::parse, "expected a non-negative integer, got " + std::to_string(i));
    return static_cast<std::uint64_t>(i);
}

double value::get_double() const {
    switch (get_kind()) {
        case kind::float64: return std::get<double>(v_);
        case kind::int64: return static_cast<double>(std::get<std::int64_t>(v_));
        case kind::uint64: return static_cast<double>(std::get<std::uint64_t>(v_));
        default: wrong_kind(kind::float64, get_kind());
    }
}

const std::string& value::get_string() const {
    if (!is_string()) wrong_kind(kind::string, get_kind());
    return std::get<std::string>(v_);
}
const value::binary& value::get_binary() const {
    if (!is_binary()) wrong_kind(kind::binary, get_kind());
    return std::get<binary>(v_);
}
const value::array& value::get_array() const {
    if (!is_array()) wrong_kind(kind::array, get_kind());
    return std::get<array>(v_);
}
value::array& value::get_array() {
    if (!is_array()) wrong_kind(kind::array, get_kind());
    return std::get<array>(v_);
}
const value::object& value::get_object() const {
    if (!is_object()) wrong_kind(kind::object, get_kind());
    return std::get<object>(v_);
}
value::object& value::get_object() {
    if (is_null()) v_ = object{};
    if (!is_object()) wrong_kind(kind::object, get_kind());
    return std::get<object>(v_);
}

const value* value::find(std::string_view key) const {
    if (!is_object()) return nullptr;
    for (auto& [k, v] : std::get<object>(v_))
        if (k == key) return &v;
    return nullptr;
}

bool value::contains(std::string_view key) const { return find(key) != nullptr; }

const value& value::at(std::string_view key) const {
    if (auto* v = find(key)) return *v;
    throw_error(error_code::parse, "missing key '" + std::string(key) + "'");
}

value& value::operator[](std::string_view key) {
    auto& o = get_object();
    for (auto& [k, v] : o)
        if (k == key) return v;
    o.emplace_back(std::string(key), value{});
    return o.back().second;
}

std::size_t value::size() const {
    if (is_array()) return std::get<array>(v_).size();
    if (is_object()) return std::get<object>(v_).size();
    return 0;
}

void value::push_back(value v) {
    if (is_null()) v_ = array{};
    get_array().push_back(std::move(v));
}

bool operator==(const value& a, const value& b) {
    if (a.is_integer() && b.is_integer()) {
        if (a.get_kind() == b.get_kind()) return a.v_ == b.v_;
        auto ai = a.get_kind() == value::kind::int64 ? std::get<std::int64_t>(a.v_) : -1;
        auto bi = b.get_kind() == value::kind::int64 ? std::get<std::int64_t>(b.v_) : -1;
        if (ai < 0 || bi < 0) {
            // one is negative int64: equal only if both represent the same number
            if (a.get_kind() == value::kind::int64 && ai < 0) return false;
            if (b.get_kind() == value::kind::int64 && bi < 0) return false;
        }
        return a.get_uint64() == b.get_uint64();
    }
    if (a.get_kind() == value::kind::float64 && b.get_kind() == value::kind::float64) {
        double x = std::get<double>(a.v_), y = std::get<double>(b.v_);
        return x == y || (std::isnan(x) && std::isnan(y));
    }
    return a.v_ == b.v_;
}

std::size_t value::hash() const {
    std::size_t h = static_cast<std::size_t>(get_kind());
    auto mix = [&](std::size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    switch (get_kind()) {
        case kind::null: break;
        case kind::boolean: mix(std::get<bool>(v_)); break;
        case kind::int64:
        case kind::uint64: h = 2; mix(std::hash<std::uint64_t>{}(static_cast<std::uint64_t>(
                               get_kind() == kind::int64 ? static_cast<std::uint64_t>(std::get<std::int64_t>(v_))
                                                         : std::get<std::uint64_t>(v_))));
            break;
        case kind::float64: {
            // All NaNs compare equal (operator==), so they must hash alike whatever their bits.
            double d = std::get<double>(v_);
            mix(std::isnan(d) ? std::size_t{0x7ff8} : std::hash<double>{}(d));
            break;
        }
        case kind::string: mix(std::hash<std::string>{}(std::get<std::string>(v_))); break;
        case kind::binary: mix(std::hash<std::string>{}(std::get<binary>(v_).bytes)); break;
        case kind::array:
            for (auto& x : std::get<array>(v_)) mix(x.hash());
            break;
        case kind::object:
            for (auto& [k, x] : std::get<object>(v_)) {
                mix(std::hash<std::string>{}(k));
                mix(x.hash());
            }
            break;
    }
    return h;
}

std::ostream& operator<<(std::ostream& os, const value& v) {
    switch (v.get_kind()) {
        case value::kind::null: return os << "null";
        case value::kind::boolean: return os << (v.get_bool() ? "true" : "false");
        case value::kind::int64: return os << v.get_int64();
        case value::kind::uint64: return os << v.get_uint64();
        case value::kind::float64: {
            std::ostringstream ss;
            ss << std::setprecision(9) << v.get_double();
            return os << ss.str();
        }
        case value::kind::string: return os << std::quoted(v.get_string());
        case value::kind::binary: {
            // Small ones (a constant_of_shape's one value) in full, so the text form reads
            // them back; large ones (weights) only by size.
            const auto& bytes = v.get_binary().bytes;
            if (bytes.size() > max_printed_binary_bytes) return os << "<" << bytes.size() << " bytes>";
            static constexpr char digits[] = "0123456789abcdef";
            os << "0x";
            for (unsigned char c : bytes) os << digits[c >> 4] << digits[c & 15];
            return os;
        }
        case value::kind::array: {
            os << "[";
            bool first = true;
            for (auto& x : v.get_array()) {
                os << (first ? "" : ", ") << x;
                first = false;
            }
            return os << "]";
        }
        case value::kind::object: {
            os << "{";
            bool first = true;
            for (auto& [k, x] : v.get_object()) {
                os << (first ? "" : ", ") << k << ": " << x;
                first = false;
            }
            return os << "}";
        }
    }
    return os;
}

std::string value::to_string() const {
    std::ostringstream ss;
    ss << *this;
    return ss.str();
}

}  // namespace kiln
