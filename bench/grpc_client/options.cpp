#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <stdexcept>
#include <string_view>

namespace kiln_grpc_bench {

namespace {
constexpr const char* usage =
    "usage: kiln_grpc_bench --model NAME --input NAME=FILE.pb [--input ...] [options]\n"
    "\n"
    "Sends ModelInfer (inputs as raw_input_contents) to an Open Inference Protocol gRPC server\n"
    "(`kiln serve --grpc-port`) and prints the latency of each answered request.\n"
    "\n"
    "  --host H          server address (default 127.0.0.1)\n"
    "  --port P          gRPC port (default 8001)\n"
    "  --model NAME      model name (required)\n"
    "  --version V       model version (default: the server's choice)\n"
    "  --input NAME=F    input tensor NAME read from the ONNX TensorProto file F (repeatable)\n"
    "  -n N              measured requests per client (default 200)\n"
    "  --warmup W        untimed requests per client first (default 10)\n"
    "  --clients C       concurrent clients, each a thread with its own channel (default 1)\n"
    "  --json            one JSON object on stdout instead of the text line\n"
    "\n"
    "Exit status: 0 every request answered, 1 a request failed (or no connection),\n"
    "2 bad usage or an unreadable input file.\n";

int to_int(std::string_view flag, std::string_view text, int min) {
    int v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < min)
        throw std::invalid_argument(std::string(flag) + " wants an integer >= " + std::to_string(min) + ", not '" +
                                    std::string(text) + "'");
    return v;
}
}  // namespace

std::optional<options> parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(usage, stdout);
            return std::nullopt;
        }
        if (a == "--json") {
            o.json = true;
            continue;
        }
        constexpr std::string_view with_value[] = {"--host",  "--port", "--model",  "--version",
                                                   "--input", "-n",     "--warmup", "--clients"};
        if (std::find(std::begin(with_value), std::end(with_value), a) == std::end(with_value))
            throw std::invalid_argument("unknown option '" + std::string(a) + "'; see --help");
        if (i + 1 >= argc) throw std::invalid_argument(std::string(a) + " needs a value; see --help");
        std::string_view v = argv[++i];
        if (a == "--host")
            o.host = v;
        else if (a == "--port")
            o.port = to_int(a, v, 1);
        else if (a == "--model")
            o.model = v;
        else if (a == "--version")
            o.version = v;
        else if (a == "-n")
            o.n = to_int(a, v, 1);
        else if (a == "--warmup")
            o.warmup = to_int(a, v, 0);
        else if (a == "--clients")
            o.clients = to_int(a, v, 1);
        else if (a == "--input") {
            auto eq = v.find('=');
            if (eq == std::string_view::npos || eq == 0 || eq + 1 == v.size())
                throw std::invalid_argument(
                    "--input wants NAME=FILE.pb (the model's input name, then the file), not '" + std::string(v) + "'");
            o.inputs.push_back({std::string(v.substr(0, eq)), std::string(v.substr(eq + 1))});
        }
    }
    if (o.model.empty()) throw std::invalid_argument("--model NAME is required; see --help");
    if (o.inputs.empty()) throw std::invalid_argument("at least one --input NAME=FILE.pb is required; see --help");
    return o;
}

}  // namespace kiln_grpc_bench
