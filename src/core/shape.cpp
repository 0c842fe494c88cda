#include <kiln/errors.hpp>
#include <kiln/shape.hpp>

#include <algorithm>
#include <numeric>
#include <ostream>
#include <sstream>

namespace kiln {

struct shape::impl {
    kind k = kind::tensor;
    type t = type::float32;
    std::vector<std::size_t> lens;
    std::vector<std::size_t> strides;
    std::vector<dynamic_dimension> dyn;  // non-empty only for dynamic tensors
    bool is_dynamic = false;
    std::vector<shape> subs;
    std::vector<std::string> values;  // see shape::with_values
    std::size_t elements = 1;
    std::size_t space = 1;
    bool standard = true;
};

namespace {

// Products of dims come from untrusted models: refuse anything over 2^48 elements
// rather than overflow.
constexpr std::size_t max_elements = std::size_t{1} << 48;

std::size_t checked_product(const std::vector<std::size_t>& lens) {
    std::size_t n = 1;
    for (auto d : lens) {
        if (d == 0) return 0;
        if (n > max_elements / d) {
            std::ostringstream ss;
            ss << "a tensor of dims {";
            for (std::size_t i = 0; i < lens.size(); ++i) ss << (i ? ", " : "") << lens[i];
            ss << "} has more than 2^48 elements";
            throw_error(error_code::shape, ss.str());
        }
        n *= d;
    }
    return n;
}

void finish_static(shape::impl& p) {
    if (p.strides.size() != p.lens.size())
        throw_error(error_code::shape, "strides and lens differ in rank (" +
                                           std::to_string(p.strides.size()) + " vs " +
                                           std::to_string(p.lens.size()) + ")");
    p.elements = checked_product(p.lens);
    if (p.elements == 0) {
        p.space = 0;
    } else {
        std::size_t s = 1;
        for (std::size_t i = 0; i < p.lens.size(); ++i) {
            if (p.strides[i] > max_elements) throw_error(error_code::shape, "stride too large");
            s += (p.lens[i] - 1) * p.strides[i];
            if (s > max_elements) throw_error(error_code::shape, "tensor spans more than 2^48 elements");
        }
        p.space = s;
    }
    p.standard = p.strides == shape::standard_strides(p.lens) || p.elements == 0 ||
                 [&] {
                     // Dims of length 1 may have any stride and still be row-major.
                     auto st = shape::standard_strides(p.lens);
                     for (std::size_t i = 0; i < p.lens.size(); ++i)
                         if (p.lens[i] != 1 && p.strides[i] != st[i]) return false;
                     return true;
                 }();
}

bool is_number(const std::string& e) {
    std::size_t i = e.size() > 1 && e[0] == '-' ? 1 : 0;
    return i < e.size() && std::all_of(e.begin() + static_cast<std::ptrdiff_t>(i), e.end(),
                                       [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const dynamic_dimension& d) {
    if (d.is_fixed()) return os << d.min;
    os << "{";
    if (!d.symbol.empty()) os << d.symbol << "=";
    os << d.min << ":";
    if (d.max == dynamic_dimension::unbounded) os << "?";
    else os << d.max;
    if (!d.optimals.empty()) {
        os << ":[";
        bool first = true;
        for (auto o : d.optimals) {
            os << (first ? "" : ",") << o;
            first = false;
        }
        os << "]";
    }
    return os << "}";
}

std::vector<std::size_t> shape::standard_strides(const std::vector<std::size_t>& lens) {
    std::vector<std::size_t> s(lens.size(), 1);
    std::size_t acc = 1;
    for (std::size_t i = lens.size(); i-- > 0;) {
        s[i] = acc;
        acc *= std::max<std::size_t>(lens[i], 1);
    }
    return s;
}

shape::shape(std::shared_ptr<const impl> p) : impl_(std::move(p)) {}

shape::shape() : shape(type::float32) {}

shape::shape(type t) : shape(t, std::vector<std::size_t>{}) {}

shape::shape(type t, std::vector<std::size_t> lens) {
    auto p = std::make_shared<impl>();
    p->t = t;
    p->strides = standard_strides(lens);
    p->lens = std::move(lens);
    finish_static(*p);
    impl_ = std::move(p);
}

shape::shape(type t, std::vector<std::size_t> lens, std::vector<std::size_t> strides) {
    auto p = std::make_shared<impl>();
    p->t = t;
    p->lens = std::move(lens);
    p->strides = std::move(strides);
    finish_static(*p);
    impl_ = std::move(p);
}

shape shape::make_dynamic(type t, std::vector<dynamic_dimension> dims) {
    auto p = std::make_shared<impl>();
    p->t = t;
    bool all_fixed = std::all_of(dims.begin(), dims.end(), [](auto& d) { return d.is_fixed(); });
    // A fixed dimension has nothing to optimize for; dropping its optimals keeps equal
    // shapes equal and lets the text form (which prints fixed dims as a number) round-trip.
    for (auto& d : dims)
        if (d.is_fixed()) {
            d.optimals.clear();
            d.symbol.clear();
        }
    for (auto& d : dims)
        if (d.min > d.max)
            throw_error(error_code::shape, "dynamic dimension with min " + std::to_string(d.min) +
                                               " > max " + std::to_string(d.max));
    if (all_fixed) {
        for (auto& d : dims) p->lens.push_back(d.min);
        p->strides = standard_strides(p->lens);
        finish_static(*p);
    } else {
        p->is_dynamic = true;
        p->dyn = std::move(dims);
        p->standard = false;
        p->elements = 0;
        p->space = 0;
    }
    return shape(std::shared_ptr<const impl>(std::move(p)));
}

shape shape::tuple(std::vector<shape> elements) {
    auto p = std::make_shared<impl>();
    p->k = kind::tuple;
    p->is_dynamic = std::any_of(elements.begin(), elements.end(), [](auto& s) { return s.dynamic(); });
    p->subs = std::move(elements);
    p->standard = false;
    return shape(std::shared_ptr<const impl>(std::move(p)));
}

shape shape::sequence(shape element) {
    auto p = std::make_shared<impl>();
    p->k = kind::sequence;
    p->t = element.get_type();
    p->is_dynamic = true;  // the length is only known at run time
    p->subs = {std::move(element)};
    p->standard = false;
    return shape(std::shared_ptr<const impl>(std::move(p)));
}

shape shape::optional(shape element) {
    auto p = std::make_shared<impl>();
    p->k = kind::optional;
    p->t = element.get_type();
    p->is_dynamic = true;  // present or not is only known at run time
    p->subs = {std::move(element)};
    p->standard = false;
    return shape(std::shared_ptr<const impl>(std::move(p)));
}

shape::kind shape::get_kind() const { return impl_->k; }
const std::vector<shape>& shape::sub_shapes() const { return impl_->subs; }
type shape::get_type() const { return impl_->t; }

std::size_t shape::ndim() const {
    return impl_->is_dynamic && is_tensor() ? impl_->dyn.size() : impl_->lens.size();
}

const std::vector<std::size_t>& shape::lens() const {
    if (impl_->is_dynamic)
        throw_error(error_code::shape, "lens() of dynamic shape " + to_string());
    return impl_->lens;
}

std::vector<std::size_t> shape::opt_lens() const {
    if (!impl_->is_dynamic) return lens();
    std::vector<std::size_t> out;
    for (auto& d : dyn_dims()) out.push_back(d.optimals.empty() ? d.min : *d.optimals.begin());
    return out;
}

std::vector<std::size_t> shape::min_lens() const {
    if (!impl_->is_dynamic) return lens();
    std::vector<std::size_t> out;
    for (auto& d : dyn_dims()) out.push_back(d.min);
    return out;
}

std::vector<std::size_t> shape::max_lens() const {
    if (!impl_->is_dynamic) return lens();
    std::vector<std::size_t> out;
    for (auto& d : dyn_dims()) out.push_back(d.max);
    return out;
}

const std::vector<std::size_t>& shape::strides() const {
    if (impl_->is_dynamic)
        throw_error(error_code::shape, "strides() of dynamic shape " + to_string());
    return impl_->strides;
}

std::size_t shape::elements() const {
    if (impl_->is_dynamic)
        throw_error(error_code::shape, "elements() of dynamic shape " + to_string());
    if (!is_tensor()) return 0;
    return impl_->elements;
}

std::size_t shape::element_space() const {
    if (impl_->is_dynamic)
        throw_error(error_code::shape, "element_space() of dynamic shape " + to_string());
    return impl_->space;
}

std::size_t shape::type_size() const { return kiln::type_size(impl_->t); }

std::size_t shape::bytes() const {
    if (is_tuple()) {
        std::size_t n = 0;
        for (auto& s : impl_->subs) n += s.bytes();
        return n;
    }
    return element_space() * type_size();
}

bool shape::standard() const { return is_tensor() && !impl_->is_dynamic && impl_->standard; }

bool shape::broadcasted() const {
    if (!is_tensor() || impl_->is_dynamic) return false;
    for (std::size_t i = 0; i < impl_->lens.size(); ++i)
        if (impl_->lens[i] > 1 && impl_->strides[i] == 0) return true;
    return false;
}

bool shape::packed() const {
    if (!is_tensor() || impl_->is_dynamic) return false;
    return !broadcasted() && impl_->space == impl_->elements;
}

bool shape::transposed() const { return packed() && !standard(); }

bool shape::dynamic() const { return impl_->is_dynamic; }

const std::vector<dynamic_dimension>& shape::dyn_dims() const {
    static const std::vector<dynamic_dimension> none;
    return impl_->is_dynamic ? impl_->dyn : none;
}

std::vector<dynamic_dimension> shape::to_dynamic_dims() const {
    if (impl_->is_dynamic) return impl_->dyn;
    std::vector<dynamic_dimension> out;
    for (auto d : impl_->lens) out.push_back({d, d, {}});
    return out;
}

std::size_t shape::index(const std::vector<std::size_t>& idx) const {
    std::size_t off = 0;
    const auto& st = strides();
    for (std::size_t i = 0; i < idx.size() && i < st.size(); ++i) off += idx[i] * st[i];
    return off;
}

std::size_t shape::index(std::size_t linear) const {
    if (impl_->standard) return linear;
    const auto& l = impl_->lens;
    const auto& st = impl_->strides;
    std::size_t off = 0;
    for (std::size_t i = l.size(); i-- > 0;) {
        off += (linear % l[i]) * st[i];
        linear /= l[i];
    }
    return off;
}

std::vector<std::size_t> shape::multi(std::size_t linear) const {
    const auto& l = lens();
    std::vector<std::size_t> out(l.size());
    for (std::size_t i = l.size(); i-- > 0;) {
        out[i] = l[i] == 0 ? 0 : linear % l[i];
        if (l[i] != 0) linear /= l[i];
    }
    return out;
}

shape shape::with_type(type t) const {
    if (is_tuple()) throw_error(error_code::type, "with_type on a tuple shape");
    if (impl_->is_dynamic) {
        if (is_tensor()) return make_dynamic(t, impl_->dyn);
        auto p = std::make_shared<impl>(*impl_);
        p->t = t;
        p->subs = {impl_->subs.front().with_type(t)};
        return shape(std::shared_ptr<const impl>(std::move(p)));
    }
    return shape(t, impl_->lens, impl_->strides);
}

shape shape::with_lens(std::vector<std::size_t> lens) const { return shape(get_type(), std::move(lens)); }

shape shape::as_standard() const { return shape(get_type(), lens()); }

shape shape::with_values(std::vector<std::string> values) const {
    if (values.empty()) {
        if (!has_values()) return *this;
        auto p = std::make_shared<impl>(*impl_);
        p->values.clear();
        return shape(std::shared_ptr<const impl>(std::move(p)));
    }
    if (!is_tensor() || dynamic() ||
        (get_type() != type::int64 && get_type() != type::int32 && get_type() != type::bool_) ||
        elements() != values.size() || values.size() > max_valued_elements)
        throw_error(error_code::invalid_argument,
                    "values are kept for static int32/int64/bool tensors of at most " + std::to_string(max_valued_elements) +
                        " elements, not " + to_string() + " with " + std::to_string(values.size()));
    auto p = std::make_shared<impl>(*impl_);
    p->values = std::move(values);
    return shape(std::shared_ptr<const impl>(std::move(p)));
}

const std::vector<std::string>& shape::values() const { return impl_->values; }

std::string shape::to_string() const {
    std::ostringstream ss;
    ss << *this;
    return ss.str();
}

bool operator==(const shape& a, const shape& b) {
    if (a.impl_ == b.impl_) return true;
    const auto& x = *a.impl_;
    const auto& y = *b.impl_;
    // Standard layouts address memory identically whatever the strides of their length-1
    // (or zero-sized) dims, and print identically: they are one shape.
    if (a.standard() && b.standard()) return x.t == y.t && x.lens == y.lens;
    return x.k == y.k && x.t == y.t && x.is_dynamic == y.is_dynamic && x.lens == y.lens &&
           x.strides == y.strides && x.dyn == y.dyn && x.subs == y.subs;
}

bool shape::same_lens_and_type(const shape& other) const {
    if (dynamic() || other.dynamic()) return *this == other;
    return get_type() == other.get_type() && lens() == other.lens();
}

std::size_t shape::hash() const {
    std::size_t h = static_cast<std::size_t>(impl_->k) * 31 + static_cast<std::size_t>(impl_->t);
    auto mix = [&](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    for (auto l : impl_->lens) mix(l);
    if (!standard())  // as operator==: a standard layout's strides carry no information
        for (auto s : impl_->strides) mix(s);
    for (auto& d : impl_->dyn) {
        mix(d.min);
        mix(d.max);
        mix(std::hash<std::string>{}(d.symbol));
    }
    for (auto& s : impl_->subs) mix(s.hash());
    return h;
}

std::ostream& operator<<(std::ostream& os, const shape& s) {
    switch (s.get_kind()) {
        case shape::kind::tuple: {
            os << "tuple(";
            bool first = true;
            for (auto& e : s.sub_shapes()) {
                os << (first ? "" : ", ") << e;
                first = false;
            }
            return os << ")";
        }
        case shape::kind::sequence: return os << "sequence(" << s.sub_shapes().front() << ")";
        case shape::kind::optional: return os << "optional(" << s.sub_shapes().front() << ")";
        case shape::kind::tensor: break;
    }
    os << type_name(s.get_type()) << "[";
    if (s.dynamic()) {
        bool first = true;
        for (auto& d : s.dyn_dims()) {
            os << (first ? "" : ", ") << d;
            first = false;
        }
        return os << "]";
    }
    const auto& l = s.lens();
    for (std::size_t i = 0; i < l.size(); ++i) os << (i ? ", " : "") << l[i];
    os << "]";
    // Values that are plain numbers are the literal's own text; print only symbolic ones.
    const auto& v = s.values();
    if (std::any_of(v.begin(), v.end(), [](const std::string& e) { return e.empty() || !is_number(e); })) {
        os << "<";
        for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << (v[i].empty() ? "?" : v[i]);
        os << ">";
    }
    if (!s.standard() && !l.empty()) {
        os << "{";
        const auto& st = s.strides();
        for (std::size_t i = 0; i < st.size(); ++i) os << (i ? ", " : "") << st[i];
        os << "}";
    }
    return os;
}

}  // namespace kiln
