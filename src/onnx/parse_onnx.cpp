// Entry points of the ONNX frontend.
#include "onnx/graph_parser.hpp"
#include "onnx/tensor_proto.hpp"

#include <kiln/errors.hpp>
#include <kiln/onnx.hpp>

#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>

namespace kiln {

namespace onnx_frontend {

literal graph_parser::load_tensor(const onnx::TensorProto& t, const std::string& what) const {
    const auto& dir = options_.external_data_path.empty() ? model_dir_ : options_.external_data_path;
    return tensor_to_literal(t, what, dir);
}

namespace {
onnx::ModelProto decode_model(const void* data, std::size_t size, const std::string& what) {
    if (size == 0) throw_error(error_code::parse, what + ": the file is empty");
    if (size > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw_error(error_code::parse, what + ": a serialized ONNX model cannot exceed 2 GB (store the weights as "
                                              "external data)");
    onnx::ModelProto model;
    google::protobuf::io::CodedInputStream stream(static_cast<const std::uint8_t*>(data), static_cast<int>(size));
    stream.SetRecursionLimit(200);
    if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
        throw_error(error_code::parse, what + ": not a valid ONNX model (the protobuf cannot be decoded; the file "
                                              "may be truncated or corrupt)");
    if (!model.has_graph())
        throw_error(error_code::parse, what + ": not an ONNX model (it has no graph)");
    if (model.ir_version() <= 0)
        throw_error(error_code::parse, what + ": not an ONNX model (no IR version)");
    return model;
}

program build_program(const onnx::ModelProto& model, const onnx_options& options, const std::string& model_dir,
                      const std::string& what) {
    program p;
    try {
        graph_parser parser(p, options, model, model_dir);
        parser.parse_main();
    } catch (const error& e) {
        throw error(e.code(), what + ": " + e.message());
    } catch (const std::bad_alloc&) {
        throw_error(error_code::out_of_memory, what + ": out of memory while parsing");
    } catch (const std::exception& e) {
        throw_error(error_code::parse, what + ": " + e.what());
    }
    value meta = value::make_object();
    meta["producer"] = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
    meta["onnx_ir_version"] = static_cast<std::int64_t>(model.ir_version());
    meta["onnx_opset"] = static_cast<std::int64_t>(1);
    for (auto& o : model.opset_import())
        if (normalize_domain(o.domain()).empty()) meta["onnx_opset"] = static_cast<std::int64_t>(o.version());
    // The dims each graph input declares, null where symbolic or unknown: the parsed shapes
    // no longer tell a declared 1 from a default_dim_value of 1, and whoever sizes inputs
    // from data (kiln run --input) must resize only the dims the model leaves open.
    std::set<std::string> initializers;
    for (auto& init : model.graph().initializer()) initializers.insert(init.name());
    value declared = value::make_object();
    for (auto& in : model.graph().input()) {
        if (initializers.count(in.name()) || !in.type().has_tensor_type() || !in.type().tensor_type().has_shape())
            continue;
        value dims = value::make_array();
        for (auto& d : in.type().tensor_type().shape().dim())
            dims.push_back(d.has_dim_value() ? value(static_cast<std::int64_t>(d.dim_value())) : value());
        declared[in.name()] = dims;
    }
    meta["declared_input_dims"] = declared;
    if (model.metadata_props_size() > 0) {
        value props = value::make_object();
        for (auto& kv : model.metadata_props()) props[kv.key()] = kv.value();
        meta["metadata_props"] = props;
    }
    p.set_metadata(meta);
    return p;
}
}  // namespace

}  // namespace onnx_frontend

program parse_onnx(const std::string& path, const onnx_options& options) {
    // A FIFO would block the open and a directory reads as nothing: regular files only.
    std::error_code ec;
    auto status = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
        throw_error(error_code::io, "model '" + path + "' is not a regular file");
    const std::string what = "model '" + path + "'";
    onnx::ModelProto model;
    {
        // Read in one piece of the file's size (growing a string as it reads would hold up to
        // 1.5x the file twice over), decoded, and freed before the graph's weights become
        // literals: the bytes, the decoded protobuf and the literals are never all alive at
        // once (ResNet-50: ~100 MB each).
        std::ifstream f(path, std::ios::binary | std::ios::ate);
        if (!f) throw_error(error_code::io, "cannot open " + what);
        const auto end = f.tellg();
        if (end < 0) throw_error(error_code::io, "cannot read " + what);
        const auto size = static_cast<std::size_t>(end);
        std::unique_ptr<char[]> bytes(new char[size == 0 ? 1 : size]);
        f.seekg(0);
        f.read(bytes.get(), static_cast<std::streamsize>(size));
        if (f.bad() || static_cast<std::size_t>(f.gcount()) != size)
            throw_error(error_code::io, "cannot read " + what + " (it changed size while being read)");
        model = onnx_frontend::decode_model(bytes.get(), size, what);
    }
    auto dir = std::filesystem::path(path).parent_path().string();
    auto p = onnx_frontend::build_program(model, options, dir, what);
    auto meta = p.get_metadata();
    meta["model_path"] = path;
    p.set_metadata(meta);
    return p;
}

program parse_onnx_buffer(const void* data, std::size_t size, const onnx_options& options) {
    return onnx_frontend::build_program(onnx_frontend::decode_model(data, size, "model"), options,
                                        options.external_data_path, "model");
}

int max_supported_opset() { return 28; }

}  // namespace kiln
