#include <kiln/builtin_ops.hpp>
#include <kiln/register_op.hpp>

namespace kiln::builtin {

shape get_tuple_elem::compute_shape(const std::vector<shape>& in) const {
    if (in.size() != 1 || !in[0].is_tuple())
        throw_error(error_code::shape, "get_tuple_elem: expected one tuple input");
    if (index >= in[0].sub_shapes().size())
        throw_error(error_code::shape, "get_tuple_elem: index " + std::to_string(index) + " of a tuple of " +
                                           std::to_string(in[0].sub_shapes().size()));
    return in[0].sub_shapes()[index];
}

argument get_tuple_elem::compute(const shape&, const std::vector<argument>& args) const {
    return args.at(0).elements().at(index);
}

shape load::compute_shape(const std::vector<shape>& in) const {
    if (in.size() != 1) throw_error(error_code::shape, "load: expected the arena as its one input");
    if (in[0].is_tensor() && !in[0].dynamic() && offset + s.bytes() > in[0].bytes())
        throw_error(error_code::shape, "load: " + s.to_string() + " at offset " + std::to_string(offset) +
                                           " overruns an arena of " + std::to_string(in[0].bytes()) + " bytes");
    return s;
}

KILN_REGISTER_OP(param)
KILN_REGISTER_OP(literal_op)
KILN_REGISTER_OP(return_op)
KILN_REGISTER_OP(get_tuple_elem)
KILN_REGISTER_OP(allocate)
KILN_REGISTER_OP(load)

}  // namespace kiln::builtin
