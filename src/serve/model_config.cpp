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
