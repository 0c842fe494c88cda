// Structural ops every module uses: parameters, literals, the return, tuple access,
// and the buffer ops that lowering and memory planning insert.
#pragma once
#include <kiln/operation.hpp>

namespace kiln::builtin {

struct param {
    std::string parameter;
    shape s;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.parameter, "name");
        f(self.s, "shape");
    }
    std::string name() const { return "@param"; }
    op_traits traits() const { return {.handles_dynamic = true, .builtin = true}; }
    shape compute_shape(const std::vector<shape>&) const { return s; }
};

struct literal_op {
    std::string name() const { return "@literal"; }
    op_traits traits() const { return {.handles_dynamic = true, .builtin = true}; }
};

struct return_op {
    std::string name() const { return "@return"; }
    op_traits traits() const { return {.handles_dynamic = true, .builtin = true}; }
    shape compute_shape(const std::vector<shape>& in) const { return shape::tuple(in); }
};

// Element `index` of a tuple-shaped instruction (multi-output ops). A view.
struct get_tuple_elem {
    std::size_t index = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.index, "index"); }
    std::string name() const { return "get_tuple_elem"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape&, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// A fresh buffer for an instruction's result (destination-passing style). Memory
// planning replaces it with a `load` from the arena.
struct allocate {
    shape s;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.s, "shape"); }
    std::string name() const { return "allocate"; }
    op_traits traits() const { return {.side_effects = false, .builtin = true}; }
    shape compute_shape(const std::vector<shape>&) const { return s; }
    argument compute(const shape& out, const std::vector<argument>&) const { return argument(out); }
};

// A view of the arena (input 0, the "#scratch" parameter) at a byte offset.
struct load {
    shape s;
    std::size_t offset = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.s, "shape");
        f(self.offset, "offset");
    }
    std::string name() const { return "load"; }
    op_traits traits() const { return {.builtin = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const {
        return args.at(0).view(out, offset);
    }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// Name of the parameter that receives the planned arena.
inline constexpr const char* scratch_parameter = "#scratch";

}  // namespace kiln::builtin
