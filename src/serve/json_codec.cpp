#include "serve/json_codec.hpp"

#include <kiln/types.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kiln::serve {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& message) { fail(error_kind::bad_request, message); }

// Nested data deeper than any tensor the protocol carries is refused before it is walked.
constexpr int max_data_depth = 32;

// Counts the leaves of `data` (a number or bool, or nested arrays of them), refusing
// other values, so that the core can check the count before anything is allocated.
std::size_t count_values(const json& data, const std::string& input, bool want_bool, int depth = 0) {
    if (data.is_array()) {
        if (depth >= max_data_depth) bad("input '" + input + "': data nested too deeply");
        std::size_t n = 0;
        for (auto& d : data) n += count_values(d, input, want_bool, depth + 1);
        return n;
    }
    if (data.is_number() || (want_bool && data.is_boolean())) return 1;
    bad("input '" + input + "': data holds " + std::string(data.type_name()) + ", expected " +
        (want_bool ? "booleans or numbers" : "numbers"));
}

template <class C>
void write_values(const json& data, C*& out) {
    if (data.is_array()) {
        for (auto& d : data) write_values(d, out);
        return;
    }
    if (data.is_boolean()) *out++ = convert<C>(data.get<bool>() ? 1.0 : 0.0);
    else if (data.is_number_unsigned()) *out++ = convert<C>(data.get<std::uint64_t>());
    else if (data.is_number_integer()) *out++ = convert<C>(data.get<std::int64_t>());
    else *out++ = convert<C>(data.get<double>());
}

const json* member(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool bool_parameter(const json& obj, const char* key, const std::string& where) {
    const auto* params = member(obj, "parameters");
    if (!params) return false;
    if (!params->is_object()) bad(where + ": parameters must be an object");
    const auto* v = member(*params, key);
    if (!v) return false;
    if (!v->is_boolean()) bad(where + ": parameter " + key + " must be true or false");
    return v->get<bool>();
}

std::string string_field(const json& obj, const char* key, const std::string& where) {
    const auto* v = member(obj, key);
    if (!v) bad(where + ": '" + key + "' is missing");
    if (!v->is_string()) bad(where + ": '" + key + "' must be a string");
    return v->get<std::string>();
}

infer_input decode_input(const std::shared_ptr<const json>& doc, const json& in, std::size_t index,
                         std::string_view binary, std::size_t& binary_offset) {
    std::string where = "input " + std::to_string(index);
    if (!in.is_object()) bad(where + " must be an object");
    infer_input out;
    out.name = string_field(in, "name", where);
    where = "input '" + out.name + "'";
    out.datatype = string_field(in, "datatype", where);
    const auto* shape = member(in, "shape");
    if (!shape || !shape->is_array()) bad(where + ": 'shape' must be an array of integers");
    for (auto& d : *shape) {
        if (d.is_number_unsigned() && d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
            bad(where + ": a dimension is too large");
        if (!d.is_number_integer()) bad(where + ": 'shape' must be an array of integers");
        out.shape.push_back(d.get<std::int64_t>());
    }
    const auto* params = member(in, "parameters");
    const json* binary_size = nullptr;
    if (params) {
        if (!params->is_object()) bad(where + ": parameters must be an object");
        binary_size = member(*params, "binary_data_size");
    }
    const auto* data = member(in, "data");
    if (binary_size) {
        if (data) bad(where + ": both data and binary_data_size given");
        if (!binary_size->is_number_unsigned() && !(binary_size->is_number_integer() && binary_size->get<std::int64_t>() >= 0))
            bad(where + ": binary_data_size must be a non-negative integer");
        auto size = binary_size->get<std::uint64_t>();
        if (size > binary.size() - binary_offset)
            bad(where + ": binary_data_size " + std::to_string(size) + " runs past the body (" +
                std::to_string(binary.size() - binary_offset) + " bytes left)");
        out.data.is_raw = true;
        out.data.raw = binary.substr(binary_offset, size);
        binary_offset += size;
        return out;
    }
    if (!data) bad(where + ": no data (give 'data' or parameters.binary_data_size)");
    out.data.count = count_values(*data, out.name, out.datatype == "BOOL");
    out.data.fill = [doc, data](const argument& dst) {
        visit_numeric(dst.get_shape().get_type(), [&](auto id) {
            using C = typename decltype(id)::type;
            auto* p = dst.data_as<C>();
            write_values(*data, p);
        });
    };
    return out;
}

}  // namespace

decoded_request decode_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                     const std::string& model, std::optional<std::int64_t> version) {
    std::size_t json_size = header_length.value_or(body.size());
    if (json_size > body.size())
        bad("Inference-Header-Content-Length " + std::to_string(json_size) + " exceeds the body (" +
            std::to_string(body.size()) + " bytes)");
    auto binary = body.substr(json_size);
    auto doc = std::make_shared<json>(json::parse(body.substr(0, json_size), nullptr, false));
    if (doc->is_discarded()) bad("the request is not valid JSON");
    if (!doc->is_object()) bad("the request must be a JSON object");
    decoded_request d{doc, {}};
    auto& r = d.request;
    r.model = model;
    r.version = version;
    if (const auto* id = member(*doc, "id")) {
        if (!id->is_string()) bad("'id' must be a string");
        r.id = id->get<std::string>();
    }
    r.binary_outputs = bool_parameter(*doc, "binary_data_output", "the request");
    const auto* inputs = member(*doc, "inputs");
    if (!inputs || !inputs->is_array()) bad("the request needs 'inputs', an array");
    std::size_t offset = 0;
    for (std::size_t i = 0; i < inputs->size(); ++i) r.inputs.push_back(decode_input(doc, (*inputs)[i], i, binary, offset));
    if (offset != binary.size())
        bad(std::to_string(binary.size() - offset) + " bytes of binary data after the inputs' binary_data_size");
    if (const auto* outputs = member(*doc, "outputs")) {
        if (!outputs->is_array()) bad("'outputs' must be an array");
        for (auto& o : *outputs) {
            if (!o.is_object()) bad("each of 'outputs' must be an object");
            auto name = string_field(o, "name", "an output");
            r.outputs.push_back({name, bool_parameter(o, "binary_data", "output '" + name + "'")});
        }
    }
    return d;
}

encoded_response encode_infer_response(const infer_response& r) {
    json j = {{"model_name", r.model}, {"model_version", std::to_string(r.version)}};
    if (!r.id.empty()) j["id"] = r.id;
    std::string binary;
    json outputs = json::array();
    for (auto& o : r.outputs) {
        json out = {{"name", o.name}, {"datatype", o.datatype}, {"shape", o.shape}};
        const auto bytes = o.data.get_shape().bytes();
        if (o.binary) {
            out["parameters"] = {{"binary_data_size", bytes}};
            binary.append(o.data.data(), bytes);
        } else {
            json data = json::array();
            auto& arr = data.get_ref<json::array_t&>();
            const auto n = o.data.get_shape().elements();
            arr.reserve(n);
            visit_numeric(o.data.get_shape().get_type(), [&](auto id) {
                using C = typename decltype(id)::type;
                const auto* p = o.data.data_as<C>();
                for (std::size_t i = 0; i < n; ++i) {
                    if constexpr (std::is_arithmetic_v<C>) arr.emplace_back(p[i]);  // bool, ints, float, double
                    else arr.emplace_back(static_cast<double>(convert<float>(p[i])));  // half, bfloat16
                }
            });
            out["data"] = std::move(data);
        }
        outputs.push_back(std::move(out));
    }
    j["outputs"] = std::move(outputs);
    encoded_response e;
    e.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    if (!binary.empty() || std::any_of(r.outputs.begin(), r.outputs.end(), [](auto& o) { return o.binary; })) {
        e.header_length = e.body.size();
        e.body += binary;
    }
    return e;
}

std::string error_body(const std::string& message) {
    return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kiln::serve
