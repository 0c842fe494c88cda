#include "serve/grpc_codec.hpp"

#include "serve/datatype.hpp"

#include <kiln/types.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace kiln::serve {

namespace {

[[noreturn]] void bad(const std::string& message) { fail(error_kind::bad_request, message); }

using contents = inference::InferTensorContents;

// The number of values in each of the contents' fields, and which one the datatype uses.
std::size_t values_in(const contents& c) {
    return static_cast<std::size_t>(c.bool_contents_size()) + c.int_contents_size() + c.int64_contents_size() +
           c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() + c.fp64_contents_size() +
           c.bytes_contents_size();
}

// Copies a repeated field into the tensor, converting to its element type.
template <class Field>
std::function<void(const argument&)> copier(const Field& field) {
    return [&field](const argument& dst) {
        visit_numeric(dst.get_shape().get_type(), [&](auto id) {
            using C = typename decltype(id)::type;
            auto* out = dst.data_as<C>();
            if constexpr (std::is_same_v<C, typename Field::value_type>) {
                if (!field.empty()) std::memcpy(out, field.data(), field.size() * sizeof(C));
            } else {
                for (const auto& v : field) *out++ = convert<C>(v);
            }
        });
    };
}

// The typed field a datatype's values travel in, as the protocol assigns them.
input_data typed_input(const inference::ModelInferRequest::InferInputTensor& in) {
    const auto& c = in.contents();
    const auto& dt = in.datatype();
    input_data d;
    auto take = [&](const auto& field, const char* field_name) {
        if (static_cast<std::size_t>(field.size()) != values_in(c))
            bad("input '" + in.name() + "': datatype " + dt + " takes its values in " + field_name +
                ", other contents fields are set");
        d.count = static_cast<std::size_t>(field.size());
        d.fill = copier(field);
    };
    if (dt == "BOOL") take(c.bool_contents(), "bool_contents");
    else if (dt == "INT8" || dt == "INT16" || dt == "INT32") take(c.int_contents(), "int_contents");
    else if (dt == "INT64") take(c.int64_contents(), "int64_contents");
    else if (dt == "UINT8" || dt == "UINT16" || dt == "UINT32") take(c.uint_contents(), "uint_contents");
    else if (dt == "UINT64") take(c.uint64_contents(), "uint64_contents");
    else if (dt == "FP32") take(c.fp32_contents(), "fp32_contents");
    else if (dt == "FP64") take(c.fp64_contents(), "fp64_contents");
    else if (dt == "FP16" || dt == "BF16")
        bad("input '" + in.name() + "': " + dt + " has no typed contents field, send it in raw_input_contents");
    else d.count = values_in(c);  // an unknown datatype: the core refuses it by name
    return d;
}

}  // namespace

std::optional<std::int64_t> parse_version(const std::string& v) {
    if (v.empty()) return std::nullopt;
    if (v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) < 1)
        bad("version '" + v + "' is not a positive integer");
    return std::stoll(v);
}

grpc_decoded decode_grpc_request(const inference::ModelInferRequest& m) {
    grpc_decoded d;
    auto& r = d.request;
    if (m.model_name().empty()) bad("model_name is empty");
    r.model = m.model_name();
    r.version = parse_version(m.model_version());
    r.id = m.id();
    const int n = m.inputs_size();
    const bool raw = m.raw_input_contents_size() > 0;
    if (raw && m.raw_input_contents_size() != n)
        bad(std::to_string(m.raw_input_contents_size()) + " raw_input_contents for " + std::to_string(n) +
            " inputs: give one per input, in the order of the inputs");
    r.inputs.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        const auto& in = m.inputs(i);
        if (in.name().empty()) bad("input " + std::to_string(i) + " has no name");
        infer_input x;
        x.name = in.name();
        x.datatype = in.datatype();
        x.shape.assign(in.shape().begin(), in.shape().end());
        if (raw) {
            if (in.has_contents() && values_in(in.contents()) > 0)
                bad("input '" + in.name() + "' has contents while raw_input_contents is given: use one or the other");
            x.data.is_raw = true;
            x.data.raw = m.raw_input_contents(i);
        } else {
            x.data = typed_input(in);
        }
        r.inputs.push_back(std::move(x));
    }
    d.typed = !raw && n > 0;
    for (const auto& o : m.outputs()) {
        if (o.name().empty()) bad("a requested output has no name");
        r.outputs.push_back({o.name(), false});
    }
    return d;
}

void encode_grpc_response(const infer_response& r, bool typed, inference::ModelInferResponse& out) {
    out.set_model_name(r.model);
    out.set_model_version(std::to_string(r.version));
    out.set_id(r.id);
    // Raw and typed cannot mix in one response: one output that only travels raw makes all raw.
    for (const auto& o : r.outputs)
        if (o.datatype == "FP16" || o.datatype == "BF16") typed = false;
    for (const auto& o : r.outputs) {
        auto* t = out.add_outputs();
        t->set_name(o.name);
        t->set_datatype(o.datatype);
        for (auto d : o.shape) t->add_shape(d);
        const auto& s = o.data.get_shape();
        if (!typed) {
            out.add_raw_output_contents()->assign(o.data.data(), s.bytes());
            continue;
        }
        auto* c = t->mutable_contents();
        const auto n = s.elements();
        visit_numeric(s.get_type(), [&](auto id) {
            using C = typename decltype(id)::type;
            const auto* p = o.data.data_as<C>();
            auto put = [&](auto* field) {
                using V = typename std::remove_pointer_t<decltype(field)>::value_type;
                field->Reserve(static_cast<int>(n));
                for (std::size_t i = 0; i < n; ++i) field->AddAlreadyReserved(static_cast<V>(p[i]));
            };
            if constexpr (std::is_same_v<C, bool>) put(c->mutable_bool_contents());
            else if constexpr (std::is_same_v<C, float>) put(c->mutable_fp32_contents());
            else if constexpr (std::is_same_v<C, double>) put(c->mutable_fp64_contents());
            else if constexpr (std::is_same_v<C, std::int64_t>) put(c->mutable_int64_contents());
            else if constexpr (std::is_same_v<C, std::uint64_t>) put(c->mutable_uint64_contents());
            else if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) put(c->mutable_int_contents());
            else if constexpr (std::is_integral_v<C>) put(c->mutable_uint_contents());
            else fail(error_kind::internal, "output '" + o.name + "': " + o.datatype + " has no typed contents field");
        });
    }
}

}  // namespace kiln::serve
