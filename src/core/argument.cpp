#include "core/buffer_recycler.hpp"
#include "core/device_memory.hpp"
#include "core/host_allocation.hpp"

#include <kiln/allocation_limit.hpp>
#include <kiln/argument.hpp>
#include <kiln/errors.hpp>

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <new>
#include <sstream>

namespace kiln {

namespace {
thread_local std::size_t max_buffer_bytes = static_cast<std::size_t>(-1);
}  // namespace

allocation_limit::allocation_limit(std::size_t max_bytes) : previous_(max_buffer_bytes) {
    if (max_bytes < max_buffer_bytes) max_buffer_bytes = max_bytes;
}

allocation_limit::~allocation_limit() { max_buffer_bytes = previous_; }

std::size_t detail::thread_allocation_limit() { return max_buffer_bytes; }

namespace {

std::shared_ptr<char> allocate_buffer_filled(type t, std::size_t count, bool zeros) {
    const std::size_t size = type_size(t);
    if (count != 0 && (count > max_buffer_bytes / (size == 0 ? 1 : size)))
        throw_error(error_code::out_of_memory, "a buffer of " + std::to_string(count) + " " +
                                                   std::string(type_name(t)) + " elements is over this thread's " +
                                                   "allocation limit of " + std::to_string(max_buffer_bytes) + " bytes");
    if (t == type::string) {
        auto* p = new std::string[count == 0 ? 1 : count];
        return std::shared_ptr<char>(reinterpret_cast<char*>(p),
                                     [](char* q) { delete[] reinterpret_cast<std::string*>(q); });
    }
    std::size_t bytes = count * type_size(t);
    std::size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    auto* recycler = detail::active_recycler();
    if (recycler)
        if (auto reused = recycler->take(rounded)) {
            if (zeros) std::memset(reused.get(), 0, rounded);  // as fresh: zeros
            return reused;
        }
    void* p = detail::allocate_host(rounded);
    if (p == nullptr)
        throw_error(error_code::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes");
    detail::count_fresh_allocation();
    if (zeros) std::memset(p, 0, rounded);
    std::shared_ptr<char> buffer(static_cast<char*>(p), [](char* q) { std::free(q); });
    if (recycler) recycler->keep(buffer, rounded);
    return buffer;
}

}  // namespace

std::shared_ptr<char> allocate_buffer(type t, std::size_t count) { return allocate_buffer_filled(t, count, true); }

argument::argument(const shape& s) : shape_(s), has_shape_(true) {
    if (s.is_tuple()) {
        for (auto& e : s.sub_shapes()) subs_.emplace_back(e);
        return;
    }
    if (!s.is_tensor()) return;  // an empty sequence / absent optional
    if (s.dynamic())
        throw_error(error_code::shape, "cannot allocate a buffer for dynamic shape " + s.to_string());
    data_ = allocate_buffer(s.get_type(), s.element_space());
}

argument argument::for_overwrite(const shape& s) {
    if (!s.is_tensor() || s.dynamic() || s.get_type() == type::string) return argument(s);
    argument a;
    a.shape_ = s;
    a.has_shape_ = true;
    // Small buffers are zeroed anyway: the zeros cost little and leave the buffer in the
    // cache the kernel writes through (bert_small's generic program at 7 tokens ran 0.53-0.56
    // ms without them against 0.49-0.50 with; at 128 tokens 3.95-4.49 against 4.14-4.59).
    constexpr std::size_t zeroed_up_to = 256u << 10;
    a.data_ = allocate_buffer_filled(s.get_type(), s.element_space(), s.bytes() <= zeroed_up_to);
    return a;
}

argument::argument(const shape& s, std::shared_ptr<char> data)
    : shape_(s), data_(std::move(data)), has_shape_(true) {
    // A device target's buffer (core/device_memory.hpp) is device memory.
    if (const auto* owner = std::get_deleter<detail::device_memory_owner>(data_)) {
        location_ = memory_location::device;
        device_id_ = owner->device_id;
    }
}

argument argument::borrow(const shape& s, void* data, memory_location where, int device_id) {
    argument a;
    a.shape_ = s;
    a.has_shape_ = true;
    // An aliasing shared_ptr with no owner: it never frees the caller's memory.
    a.data_ = std::shared_ptr<char>(std::shared_ptr<char>(), static_cast<char*>(data));
    a.location_ = where;
    a.device_id_ = device_id;
    return a;
}

argument argument::adopt(const shape& s, std::shared_ptr<char> data, memory_location where, int device_id) {
    argument a(s, std::move(data));
    a.location_ = where;
    a.device_id_ = device_id;
    return a;
}

argument argument::make_tuple(std::vector<argument> elements) {
    std::vector<shape> shapes;
    for (auto& e : elements) shapes.push_back(e.get_shape());
    argument a;
    a.shape_ = shape::tuple(std::move(shapes));
    a.has_shape_ = true;
    a.subs_ = std::move(elements);
    return a;
}

argument argument::make_sequence(const shape& element, std::vector<argument> items) {
    argument a;
    a.shape_ = shape::sequence(element);
    a.has_shape_ = true;
    a.subs_ = std::move(items);
    return a;
}

argument argument::make_optional(const shape& element, std::optional<argument> item) {
    argument a;
    a.shape_ = shape::optional(element);
    a.has_shape_ = true;
    if (item) a.subs_.push_back(std::move(*item));
    return a;
}

argument argument::view(const shape& s, std::size_t offset) const {
    argument a = *this;
    a.shape_ = s;
    a.data_ = std::shared_ptr<char>(data_, data_.get() + offset);
    return a;
}

void argument::copy_to(const argument& dest) const {
    const auto& ds = dest.get_shape();
    if (!shape_.same_lens_and_type(ds))
        throw_error(error_code::shape, "copy from " + shape_.to_string() + " to " + ds.to_string());
    if (location_ != memory_location::host || dest.location_ != memory_location::host)
        throw_error(error_code::runtime, "argument::copy_to needs host memory; use the target's copy");
    const std::size_t n = shape_.elements();
    if (n == 0) return;
    if (shape_.standard() && ds.standard() && shape_.get_type() != type::string) {
        std::memcpy(dest.data(), data(), n * shape_.type_size());
        return;
    }
    // Row by row of the last dim, the offsets of the dims before it stepped like an odometer
    // (a view's index per element cost two divisions per dim: a channels-last convolution
    // result made row-major ran at 10 ns an element).
    visit(*this, [&](auto src) {
        using C = std::remove_const_t<std::remove_reference_t<decltype(src[0])>>;
        const C* from = data_as<C>();
        C* to = dest.template data_as<C>();
        const auto& lens = shape_.lens();
        const auto& fs = shape_.strides();
        const auto& ts = ds.strides();
        if (lens.empty()) {
            to[0] = from[0];
            return;
        }
        const std::size_t last = lens.size() - 1, row = lens[last], fstep = fs[last], tstep = ts[last];
        std::vector<std::size_t> idx(last, 0);
        std::size_t f = 0, t = 0;
        // The next block's offsets: the dims before the last (but `skip`) stepped like an odometer.
        auto step = [&](std::size_t skip) {
            for (std::size_t d = last; d-- > 0;) {
                if (d == skip) continue;
                f += fs[d];
                t += ts[d];
                if (++idx[d] < lens[d]) break;
                f -= lens[d] * fs[d];
                t -= lens[d] * ts[d];
                idx[d] = 0;
            }
        };
        // A transposing copy (a channels-last result made row-major): reading each row with a
        // large stride touches a cache line, and often a page, per element (a channels-last
        // [1, 512, 6399] took 11.5 ms). Where another dim p is the source's contiguous one,
        // tiles of p by the last dim read and write whole lines; the other dims step as below.
        std::size_t p = last;
        for (std::size_t d = 0; d < last; ++d)
            if (fs[d] == 1 && lens[d] > 1) p = d;
        if (p != last && fstep > 1 && row > 1) {
            constexpr std::size_t tile = 32;
            const std::size_t rows = lens[p], pstep = ts[p];
            for (std::size_t done = 0; done < n; done += rows * row, step(p))
                for (std::size_t i0 = 0; i0 < rows; i0 += tile)
                    for (std::size_t j0 = 0; j0 < row; j0 += tile) {
                        const std::size_t i1 = std::min(rows, i0 + tile), j1 = std::min(row, j0 + tile);
                        for (std::size_t i = i0; i < i1; ++i)
                            for (std::size_t j = j0; j < j1; ++j) to[t + i * pstep + j * tstep] = from[f + i + j * fstep];
                    }
            return;
        }
        for (std::size_t done = 0; done < n; done += row, step(last))
            for (std::size_t j = 0; j < row; ++j) to[t + j * tstep] = from[f + j * fstep];
    });
}

argument argument::copy() const {
    if (shape_.is_tuple()) {
        std::vector<argument> e;
        for (auto& s : subs_) e.push_back(s.copy());
        return make_tuple(std::move(e));
    }
    if (!shape_.is_tensor()) {
        argument a = *this;
        for (auto& s : a.subs_) s = s.copy();
        return a;
    }
    auto out = argument::for_overwrite(shape_.as_standard());  // copy_to writes every element
    copy_to(out);
    return out;
}

argument argument::contiguous() const {
    if (!shape_.is_tensor() || shape_.standard()) return *this;
    return copy();
}

double argument::get_double(std::size_t i) const {
    return visit_numeric(shape_.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        return convert<double>(tensor_view<C>{data_as<C>(), shape_}[i]);
    }, "get_double");
}

std::int64_t argument::get_int64(std::size_t i) const {
    return visit_numeric(shape_.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        return convert<std::int64_t>(tensor_view<C>{data_as<C>(), shape_}[i]);
    }, "get_int64");
}

bool operator==(const argument& a, const argument& b) {
    const auto& sa = a.get_shape();
    const auto& sb = b.get_shape();
    if (sa.get_kind() != sb.get_kind()) return false;
    if (!sa.is_tensor()) {
        // Sequences and optionals have an element type even when they hold nothing.
        if (!sa.is_tuple() && sa.get_type() != sb.get_type()) return false;
        if (a.subs_.size() != b.subs_.size()) return false;
        for (std::size_t i = 0; i < a.subs_.size(); ++i)
            if (a.subs_[i] != b.subs_[i]) return false;
        return true;
    }
    if (!sa.same_lens_and_type(sb)) return false;
    // Data-less arguments (default-constructed) are equal only to each other; never read them.
    if (!a.data() || !b.data()) return !a.data() && !b.data();
    const std::size_t n = sa.elements();
    return visit(a, [&](auto va) {
        using C = std::remove_reference_t<decltype(va[0])>;
        tensor_view<C> vb{b.template data_as<C>(), sb};
        for (std::size_t i = 0; i < n; ++i) {
            if constexpr (std::is_same_v<C, std::string>) {
                if (va[i] != vb[i]) return false;
            } else {
                if (std::memcmp(&va[i], &vb[i], sizeof(C)) != 0) return false;
            }
        }
        return true;
    });
}

std::string argument::to_string(std::size_t max_elements) const {
    std::ostringstream ss;
    ss << shape_;
    if (!shape_.is_tensor()) {
        ss << " {" << subs_.size() << " elements}";
        return ss.str();
    }
    if (!data_) return ss.str() + " <no data>";
    if (location_ != memory_location::host) return ss.str() + " <device>";
    ss << " {";
    const std::size_t n = shape_.elements();
    visit(*this, [&](auto v) {
        using C = std::remove_reference_t<decltype(v[0])>;
        for (std::size_t i = 0; i < n && i < max_elements; ++i) {
            if (i) ss << ", ";
            // Quotes and backslashes escaped, so the text form reads strings back whole.
            if constexpr (std::is_same_v<C, std::string>) ss << std::quoted(v[i]);
            else if constexpr (std::is_same_v<C, bool>) ss << (v[i] ? "true" : "false");
            else if constexpr (std::is_same_v<C, std::int8_t> || std::is_same_v<C, std::uint8_t>) ss << int(v[i]);
            else ss << convert<double>(v[i]);
        }
    });
    if (n > max_elements) ss << ", ...";
    ss << "}";
    return ss.str();
}

}  // namespace kiln
