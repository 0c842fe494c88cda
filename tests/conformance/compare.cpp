#include "compare.hpp"

#include <cmath>
#include <sstream>

namespace kiln::conformance {

namespace {
std::string compare_tensor(const argument& actual, const argument& expected, const tolerance& tol) {
    const auto& as = actual.get_shape();
    const auto& es = expected.get_shape();
    if (as.get_type() != es.get_type())
        return "element type " + std::string(type_name(as.get_type())) + ", expected " +
               std::string(type_name(es.get_type()));
    if (as.dynamic() || as.lens() != es.lens()) return "shape " + as.to_string() + ", expected " + es.to_string();
    const std::size_t n = es.elements();
    if (es.get_type() == type::string) {
        auto a = actual.to_vector<std::string>();
        auto e = expected.to_vector<std::string>();
        for (std::size_t i = 0; i < n; ++i)
            if (a[i] != e[i]) return "string " + std::to_string(i) + " is '" + a[i] + "', expected '" + e[i] + "'";
        return {};
    }
    auto a = actual.to_vector<double>();
    auto e = expected.to_vector<double>();
    std::size_t bad = 0, first = n;
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
        double x = a[i], y = e[i];
        bool ok;
        if (std::isnan(y)) ok = std::isnan(x);
        else if (std::isinf(y)) ok = x == y;
        else ok = !std::isnan(x) && std::fabs(x - y) <= tol.atol + tol.rtol * std::fabs(y);
        if (!ok) {
            ++bad;
            if (first == n) first = i;
            if (!std::isnan(x) && !std::isinf(y)) worst = std::max(worst, std::fabs(x - y));
        }
    }
    if (bad == 0) return {};
    std::ostringstream ss;
    ss.precision(9);
    ss << bad << " of " << n << " elements differ (first at " << first << ": " << a[first] << " vs expected "
       << e[first] << "; max abs diff " << worst << ")";
    return ss.str();
}
}  // namespace

std::string compare(const argument& actual, const argument& expected, const tolerance& tol) {
    const auto& as = actual.get_shape();
    const auto& es = expected.get_shape();
    if (es.is_tensor()) {
        if (!as.is_tensor()) return "got a " + as.to_string() + ", expected a tensor";
        return compare_tensor(actual, expected, tol);
    }
    if (es.get_kind() != as.get_kind()) return "got " + as.to_string() + ", expected " + es.to_string();
    const auto& ae = actual.elements();
    const auto& ee = expected.elements();
    if (ae.size() != ee.size())
        return "got " + std::to_string(ae.size()) + " elements, expected " + std::to_string(ee.size());
    for (std::size_t i = 0; i < ee.size(); ++i) {
        auto r = compare(ae[i], ee[i], tol);
        if (!r.empty()) return "element " + std::to_string(i) + ": " + r;
    }
    return {};
}

}  // namespace kiln::conformance
