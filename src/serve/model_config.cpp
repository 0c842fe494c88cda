#include "serve/model_config.hpp"

#include "serve/errors.hpp"

#include "model_config.pb.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::serve {

namespace {

// Collects the parser's messages (line and column included) instead of logging them.
class error_collector : public google::protobuf::io::ErrorCollector {
public:
    void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
        if (!text.empty()) text += "; ";
        text += "line " + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
    }
    std::string text;
};

std::size_t positive_size(const std::string& model, const std::string& what, const std::string& value) {
    try {
        std::size_t used = 0;
        long long n = std::stoll(value, &used);
        if (used == value.size() && n > 0) return static_cast<std::size_t>(n);
    } catch (const std::exception&) {
    }
    fail(error_kind::bad_request, "model '" + model + "' config.pbtxt: " + what + " must be a positive integer, got '" +
                                      value + "'");
}

// Triton's DataType as the protocol's datatype name; "" for what Kiln cannot run.
std::string datatype_name(inference::DataType t) {
    switch (t) {
        case inference::TYPE_BOOL: return "BOOL";
        case inference::TYPE_UINT8: return "UINT8";
        case inference::TYPE_UINT16: return "UINT16";
        case inference::TYPE_UINT32: return "UINT32";
        case inference::TYPE_UINT64: return "UINT64";
        case inference::TYPE_INT8: return "INT8";
        case inference::TYPE_INT16: return "INT16";
        case inference::TYPE_INT32: return "INT32";
        case inference::TYPE_INT64: return "INT64";
        case inference::TYPE_FP16: return "FP16";
        case inference::TYPE_FP32: return "FP32";
        case inference::TYPE_FP64: return "FP64";
        case inference::TYPE_BF16: return "BF16";
        default: return "";
    }
}

// What can be checked without the model; the shapes and types against the model are
// checked when the sample runs, by the same validation as a request.
std::vector<warmup_sample> parse_warmup(const inference::ModelConfig& proto, std::size_t max_batch_size,
                                        const std::string& where) {
    std::vector<warmup_sample> out;
    for (const auto& w : proto.model_warmup()) {
        const std::string sample = where + "model_warmup '" + w.name() + "': ";
        if (w.name().empty()) fail(error_kind::bad_request, where + "a model_warmup has no name");
        // Triton: batch_size >= 1, and 1 for a model that does not batch (0 taken as 1).
        const std::size_t batch = std::max<std::uint32_t>(w.batch_size(), 1);
        if (max_batch_size == 0 && batch != 1)
            fail(error_kind::bad_request, sample + "batch_size " + std::to_string(batch) +
                                              " needs max_batch_size > 0 (the model does not batch: give the full dims)");
        if (max_batch_size && batch > max_batch_size)
            fail(error_kind::bad_request, sample + "batch_size " + std::to_string(batch) + " exceeds max_batch_size " +
                                              std::to_string(max_batch_size));
        if (w.inputs().empty()) fail(error_kind::bad_request, sample + "no inputs");
        warmup_sample s{w.name(), {}, std::max<std::uint32_t>(w.count(), 1)};
        for (const auto& [name, in] : w.inputs()) {
            const std::string input = sample + "input '" + name + "': ";
            warmup_input wi{name, datatype_name(in.data_type()), {}, warmup_input::zero, {}};
            if (wi.datatype.empty())
                fail(error_kind::bad_request, input + "data_type " + inference::DataType_Name(in.data_type()) +
                                                  " is not one Kiln runs (TYPE_BOOL, TYPE_INT*, TYPE_UINT*, TYPE_FP16/32/64, TYPE_BF16)");
            if (max_batch_size) wi.shape.push_back(static_cast<std::int64_t>(batch));
            for (auto d : in.dims()) {
                if (d < 0) fail(error_kind::bad_request, input + "dims must be >= 0 (a warm-up runs one concrete shape)");
                wi.shape.push_back(d);
            }
            switch (in.input_data_type_case()) {
                case inference::ModelWarmup::Input::kZeroData: break;
                case inference::ModelWarmup::Input::kRandomData: wi.source = warmup_input::random; break;
                case inference::ModelWarmup::Input::kInputDataFile: {
                    const auto& f = in.input_data_file();
                    // A plain name: the file must stay inside the model's warmup/ folder.
                    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." ||
                        f == "..")
                        fail(error_kind::bad_request, input + "input_data_file '" + f +
                                                          "' must be a file name in the model's warmup/ folder");
                    wi.source = warmup_input::file;
                    wi.file_name = f;
                    break;
                }
                default:
                    fail(error_kind::bad_request, input + "set one of zero_data, random_data or input_data_file");
            }
            s.inputs.push_back(std::move(wi));
        }
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace

model_config parse_model_config(const std::string& text, const std::string& model_name) {
    const std::string where = "model '" + model_name + "' config.pbtxt: ";
    inference::ModelConfig proto;
    google::protobuf::TextFormat::Parser parser;
    error_collector errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(text, &proto))
        fail(error_kind::bad_request, where + errors.text + " (docs/server.md lists the fields kiln serve supports)");

    model_config c;
    if (!proto.name().empty() && proto.name() != model_name)
        fail(error_kind::bad_request, where + "name '" + proto.name() + "' differs from the folder's name");
    for (const auto& platform : {proto.platform(), proto.backend()})
        if (!platform.empty() && platform != "kiln" && platform != "onnxruntime_onnx" && platform != "onnxruntime")
            fail(error_kind::bad_request, where + "platform/backend '" + platform +
                                              "' is not served by kiln (kiln, onnxruntime, onnxruntime_onnx)");
    if (proto.max_batch_size() < 0) fail(error_kind::bad_request, where + "max_batch_size must be >= 0");
    c.max_batch_size = static_cast<std::size_t>(proto.max_batch_size());

    if (proto.instance_group_size() > 1)
        fail(error_kind::bad_request, where + "one instance_group at most (the cpu target has one kind of device)");
    if (proto.instance_group_size() == 1) {
        const auto& g = proto.instance_group(0);
        if (g.kind() == inference::ModelInstanceGroup::KIND_GPU || g.kind() == inference::ModelInstanceGroup::KIND_MODEL)
            fail(error_kind::bad_request, where + "instance_group kind " +
                                              inference::ModelInstanceGroup::Kind_Name(g.kind()) +
                                              " is not supported (KIND_CPU or KIND_AUTO; the target is chosen by "
                                              "parameters kiln.target)");
        if (g.count() < 0) fail(error_kind::bad_request, where + "instance_group count must be >= 1");
        c.instance_count = g.count() == 0 ? 1 : static_cast<std::size_t>(g.count());
    }

    for (const auto& [key, param] : proto.parameters()) {
        if (key == "kiln.target") c.target = param.string_value();
        else if (key == "kiln.threads") c.threads = positive_size(model_name, "kiln.threads", param.string_value());
        else fail(error_kind::bad_request, where + "unknown parameter '" + key + "' (kiln.target, kiln.threads)");
    }

    if (proto.has_dynamic_batching()) {
        const auto& b = proto.dynamic_batching();
        if (c.max_batch_size == 0)
            fail(error_kind::bad_request, where + "dynamic_batching needs max_batch_size > 0 (the largest batch it forms)");
        c.dynamic_batching = true;
        for (auto size : b.preferred_batch_size()) {
            if (size < 1 || static_cast<std::size_t>(size) > c.max_batch_size)
                fail(error_kind::bad_request, where + "preferred_batch_size " + std::to_string(size) +
                                                  " is not between 1 and max_batch_size");
            c.preferred_batch_sizes.push_back(static_cast<std::size_t>(size));
        }
        c.max_queue_delay_us = b.max_queue_delay_microseconds();
        c.max_queue_size = b.default_queue_policy().max_queue_size();
    }

    c.warmup = parse_warmup(proto, c.max_batch_size, where);

    const auto& vp = proto.version_policy();
    if (vp.has_all()) c.policy = version_policy::all;
    else if (vp.has_specific()) {
        c.policy = version_policy::specific;
        for (auto v : vp.specific().versions()) {
            if (v < 1) fail(error_kind::bad_request, where + "version_policy specific: versions start at 1");
            c.versions.push_back(v);
        }
        if (c.versions.empty()) fail(error_kind::bad_request, where + "version_policy specific names no version");
    } else if (vp.has_latest()) {
        if (vp.latest().num_versions() == 0)
            fail(error_kind::bad_request, where + "version_policy latest: num_versions must be >= 1");
        c.latest_count = vp.latest().num_versions();
    }
    return c;
}

model_config read_model_config(const std::string& model_dir, const std::string& model_name) {
    auto path = std::filesystem::path(model_dir) / "config.pbtxt";
    if (!std::filesystem::exists(path)) return {};
    std::ifstream f(path);
    if (!f) fail(error_kind::bad_request, "model '" + model_name + "': cannot read config.pbtxt");
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_model_config(ss.str(), model_name);
}

std::vector<std::int64_t> select_versions(const model_config& c, std::vector<std::int64_t> available) {
    std::sort(available.begin(), available.end());
    switch (c.policy) {
        case version_policy::all: return available;
        case version_policy::specific: {
            std::vector<std::int64_t> out;
            for (auto v : available)
                if (std::find(c.versions.begin(), c.versions.end(), v) != c.versions.end()) out.push_back(v);
            return out;
        }
        case version_policy::latest:
        default: {
            auto n = std::min(c.latest_count, available.size());
            return std::vector<std::int64_t>(available.end() - static_cast<std::ptrdiff_t>(n), available.end());
        }
    }
}

}  // namespace kiln::serve
