#include "cli_options.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

namespace kiln::cli {

namespace {

const std::vector<option_spec>& option_table() {
    static const std::vector<option_spec> t = {
        {"--target", "ref|cpu|gpu", "cpu", "target to compile for"},
        {"--batch", "N", "dynamic",
         "fix symbolic/unknown input dimensions at N (ONNX default_dim_value; without it they stay dynamic, "
         "0 to 4096, default 1); input files must agree (else exit 2)"},
        {"--default-dim-value", "N", "dynamic", "same as --batch"},
        {"--input-dim", "@name d1 d2 ...", "", "static dims of one input (repeatable)"},
        {"--default-dyn-dim", "\"{min:0,max:480000,optimals:[16000]}\"", "{min:0,max:4096,optimals:[1]}",
         "range of every symbolic/unknown input dimension that no other option sets (ONNX default_dyn_dim_value); "
         "names are kept (30 s of 16 kHz audio needs max 480000)"},
        {"--dyn-input-dim", "@name \"[{min:1,max:8,optimals:[1,4]},3,224,224]\"", "",
         "dynamic dims of one input: one generic program runs every shape in range (repeatable)"},
        {"--specialize-after", "N", "2",
         "dynamic inputs: shapes seen N times get a specialization compiled in the background (0: never)"},
        {"--max-specializations", "N", "8", "dynamic inputs: specializations kept (least recently used dropped; 0: all)"},
        {"--dynamic-buckets", "NAME=N,N,...", "",
         "dynamic inputs: sizes of a named dim compiled ahead; sizes in between run padded up to the next "
         "when the model keeps that dim's rows apart (repeatable)"},
        {"--fp16", "", "off", "compute in float16 (inputs and outputs stay float32; docs/quantization.md)"},
        {"--bf16", "", "off", "compute in bfloat16 (inputs and outputs stay float32; docs/quantization.md)"},
        {"--int8", "", "off",
         "int8 convolutions and matmuls calibrated on --calibration DIR (inputs and outputs stay float32; "
         "docs/quantization.md)"},
        {"--fp8", "", "off",
         "float8 e4m3fn activations and weights of convolutions and matmuls, per-tensor scales calibrated on "
         "--calibration DIR (the cpu target computes in float32 on the fp8 values; docs/quantization.md)"},
        {"--int4-weights", "", "off",
         "int4 weights (one scale per 32 along K) for matmuls and gemms with constant weights; activations stay "
         "float32 (docs/quantization.md)"},
        {"--calibration", "DIR", "one random set",
         "calibration inputs for --int8 / --fp8 (data_set_K/input_N.pb folders); without it the accuracy means "
         "nothing"},
        {"--calibration-method", "minmax|percentile|entropy", "minmax",
         "--int8 / --fp8: activation ranges from the extremes, the 99.99th percentile of |x|, or least KL divergence"},
        {"--dump-scales", "FILE", "", "--int8 / --fp8: write the activation and weight scales (JSON)"},
        {"--int8-residual-adds", "fuse|quant_add|float", "fuse",
         "--int8: residual adds summed into the convolution before them, as 8-bit adds after requantizing "
         "convolutions, or kept float32 (docs/quantization.md)"},
        {"--fast-math", "", "on", "allow fast approximations of exp, erf, tanh, sigmoid, division"},
        {"--no-fast-math", "", "", "exact math functions"},
        {"--exhaustive-tune", "", "off", "time candidate kernels at compile time and keep the fastest"},
        {"--device-id", "N", "0", "device to use (gpu)"},
        {"--gpu-arch", "sm_NN", "sm_90", "gpu: the CUDA architecture to compile for (no device needed; also KILN_GPU_ARCH)"},
        {"--tf32", "", "off", "gpu: float32 products and convolutions on TF32 tensor cores (default: strict fp32)"},
        {"--offload-copy", "", "on", "run takes and returns host data"},
        {"--no-offload-copy", "", "", "the caller passes device buffers"},
        {"--threads", "N", "cores",
         "worker threads (also KILN_NUM_THREADS; the cpu target's other environment switches: docs/options.md)"},
        {"-n", "N", "50", "iterations (perf)"},
        {"--iterations", "N", "50", "iterations (perf)"},
        {"--warmup", "N", "5", "warm-up runs before timing (perf)"},
        {"--seed", "N", "0", "seed of the random inputs"},
        {"--atol", "X", "1e-4", "absolute tolerance (verify)"},
        {"--rtol", "X", "1e-3", "relative tolerance (verify)"},
        {"--json", "", "off", "machine-readable output on stdout"},
        {"--quiet", "", "off", "no progress output on stderr"},
        {"-o", "FILE", "", "output file"},
        {"--input", "DIR", "random", "read input_N.pb files (ONNX test-data layout, model input order)"},
        {"--input-file", "@name FILE", "", "read one input from a .pb or .npy file (repeatable)"},
        {"--output", "DIR", "", "write output_N.pb files (model output order)"},
        {"--output-npy", "DIR", "", "write <output name>.npy files"},
        {"--expected", "DIR", "", "compare with output_N.pb files instead of ref (verify)"},
        {"--optimize", "", "off", "print the program after the target-independent passes (read)"},
        {"--passes", "a,b,...", "", "run these passes by name before printing (read)"},
        {"--per-instruction", "", "off", "time each instruction and each operation kind, with the kernel each runs in brackets (its implementation, ISA and precision; perf)"},
        {"--shapes", "\"name=1x7,1x33;...\"", "",
         "run each set of input shapes in turn, with random inputs of those shapes (perf): ';' separates "
         "groups, \"name=DxD\" names an input, a bare \"DxD\" is that input's next shape, so "
         "\"input_ids=1x1,1x17,2x128\" is three sets and \"ids=1x7,mask=1x7;ids=1x33,mask=1x33\" two; "
         "inputs not named keep their default (or --input) values. Reports per set the first call "
         "(compile included), the compiles, latency and resident memory after it"},
        {"--model-repository", "DIR", "", "serve: the models, DIR/MODEL/VERSION/model.onnx or model.kiln (docs/server.md)"},
        {"--host", "ADDR", "127.0.0.1", "serve: address to listen on (0.0.0.0: every interface)"},
        {"--http-port", "N", "8000", "serve: REST port (0: any free port)"},
        {"--metrics-port", "N", "8002", "serve: Prometheus /metrics port (0: any free port)"},
        {"--exit-timeout-secs", "N", "30", "serve: after SIGTERM, how long in-flight requests may take"},
        {"--http-threads", "N", "64", "serve: REST requests answered at once"},
        {"--grpc-port", "N", "8001", "serve: gRPC port (inference.GRPCInferenceService, grpc.health.v1; 0: any free port)"},
        {"--max-message-mb", "N", "64", "serve: the largest gRPC message, received or sent, in MiB"},
        {"--model-control-mode", "none|explicit|poll", "none",
         "serve: none: every model loaded at start; explicit: only --load-model ones, then the repository API; "
         "poll: every model, then the folder rescanned (new, changed and removed models)"},
        {"--load-model", "MODEL", "", "serve: (explicit mode) load MODEL at start; repeatable, '*' for all"},
        {"--repository-poll-secs", "N", "15", "serve: (poll mode) seconds between rescans of the repository"},
        {"--auth-token-env", "VAR", "", "serve: require the token held in environment variable VAR (REST and gRPC; "
                                        "'Authorization: Bearer T' or 'X-API-Key: T'; health exempt)"},
        {"--auth-token-file", "FILE", "", "serve: require the token held in FILE (as --auth-token-env)"},
        {"--tls-cert", "PEM", "", "serve: REST (HTTPS) and gRPC over TLS with this certificate chain (with --tls-key)"},
        {"--tls-key", "PEM", "", "serve: the private key of --tls-cert"},
    };
    return t;
}

const std::vector<std::string> shape_opts = {"--batch", "--default-dim-value", "--default-dyn-dim", "--input-dim",
                                             "--dyn-input-dim"};
const std::vector<std::string> compile_opts = {"--target", "--fp16", "--bf16", "--int8", "--fp8", "--int4-weights",
                                               "--calibration",
                                               "--calibration-method", "--dump-scales", "--int8-residual-adds",
                                               "--fast-math", "--no-fast-math", "--exhaustive-tune", "--device-id", "--gpu-arch", "--tf32",
                                               "--offload-copy", "--no-offload-copy", "--threads",
                                               "--specialize-after", "--max-specializations", "--dynamic-buckets"};
const std::vector<std::string> input_opts = {"--input", "--input-file", "--seed"};

std::vector<std::string> join(std::initializer_list<std::vector<std::string>> parts) {
    std::vector<std::string> out;
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    out.push_back("--json");
    out.push_back("--quiet");
    return out;
}

std::size_t to_size(const std::string& opt, const std::string& v) {
    if (v.empty() || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); }))
        throw usage_error(opt + " expects a non-negative integer, got '" + v + "'");
    try {
        return std::stoull(v);
    } catch (const std::exception&) {
        throw usage_error(opt + ": '" + v + "' is too large");
    }
}

double to_double(const std::string& opt, const std::string& v) {
    try {
        std::size_t used = 0;
        double d = std::stod(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
        return d;
    } catch (const std::exception&) {
        throw usage_error(opt + " expects a number, got '" + v + "'");
    }
}

std::string input_name(const std::string& opt, const std::string& v) {
    if (v.size() < 2 || v[0] != '@') throw usage_error(opt + " expects @name first, got '" + v + "'");
    return v.substr(1);
}

}  // namespace

const std::vector<command_spec>& commands() {
    static const std::vector<command_spec> c = {
        {"read", "print the program's IR (parsed, --optimize'd, or compiled with --target)", true,
         join({shape_opts, {"--target", "--optimize", "--passes"}})},
        {"params", "print each input's and output's name, element type and shape", true, join({shape_opts})},
        {"compile", "compile for a target and write a .kiln file (-o)", true, join({shape_opts, compile_opts, {"-o"}})},
        {"run", "compile (or load) and run once; print each output's summary", true,
         join({shape_opts, compile_opts, input_opts, {"--output", "--output-npy"}})},
        {"perf", "compile (or load), warm up, run N times; print latency, throughput and memory", true,
         join({shape_opts, compile_opts, input_opts, {"-n", "--iterations", "--warmup", "--per-instruction", "--shapes"}})},
        {"verify", "run on --target and on ref (or --expected) and compare every output", true,
         join({shape_opts, compile_opts, input_opts, {"--atol", "--rtol", "--expected"}})},
        {"serve", "serve a model repository over the Open Inference Protocol (KServe v2 REST and gRPC)", false,
         join({{"--model-repository", "--host", "--http-port", "--grpc-port", "--metrics-port", "--exit-timeout-secs",
                "--http-threads", "--max-message-mb", "--model-control-mode", "--load-model", "--repository-poll-secs",
                "--auth-token-env", "--auth-token-file", "--tls-cert", "--tls-key"}})},
        {"onnx-ops", "list the supported ONNX operators", false, join({})},
        {"ops", "list the IR operations", false, join({})},
        {"targets", "list the targets and whether each can run here", false, join({})},
        {"version", "print the version", false, join({})},
    };
    return c;
}

const command_spec* find_command(const std::string& name) {
    for (auto& c : commands())
        if (c.name == name) return &c;
    return nullptr;
}

const option_spec& find_option(const std::string& name) {
    for (auto& o : option_table())
        if (o.name == name) return o;
    throw usage_error("unknown option " + name);
}

std::vector<dynamic_dimension> parse_dyn_dims(const std::string& text, const std::string& option) {
    // A small grammar: '[' item (',' item)* ']' where item is N or {min:N,max:N,optimals:[N,...]}.
    std::string s;
    for (char c : text)
        if (!std::isspace(static_cast<unsigned char>(c))) s += c;
    std::size_t i = 0;
    auto fail = [&](const std::string& why) -> void {
        throw usage_error(option + ": " + why + " in '" + text + "' (expected e.g. " +
                          (option == "--dyn-input-dim" ? "[{min:1,max:8},3,224,224]" : "{min:0,max:480000}") + ")");
    };
    auto number = [&]() {
        std::size_t b = i;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        if (b == i) fail("expected a number at position " + std::to_string(b));
        return to_size(option, s.substr(b, i - b));
    };
    auto eat = [&](char c) {
        if (i < s.size() && s[i] == c) {
            ++i;
            return true;
        }
        return false;
    };
    std::vector<dynamic_dimension> dims;
    if (!eat('[')) fail("missing '['");
    do {
        if (eat('{')) {
            dynamic_dimension d{0, 0, {}};
            bool has_min = false, has_max = false;
            do {
                std::size_t b = i;
                while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
                auto key = s.substr(b, i - b);
                if (!eat(':')) fail("expected ':' after " + key);
                if (key == "min") d.min = number(), has_min = true;
                else if (key == "max") d.max = number(), has_max = true;
                else if (key == "optimals") {
                    if (!eat('[')) fail("optimals needs a list");
                    if (!eat(']')) {
                        do d.optimals.insert(number());
                        while (eat(','));
                        if (!eat(']')) fail("missing ']' after optimals");
                    }
                } else fail("unknown key '" + key + "'");
            } while (eat(','));
            if (!eat('}')) fail("missing '}'");
            if (!has_min || !has_max) fail("a dynamic dimension needs min and max");
            if (d.min > d.max) fail("min > max");
            dims.push_back(d);
        } else {
            auto n = number();
            dims.push_back(dynamic_dimension{n, n, {}});
        }
    } while (eat(','));
    if (!eat(']')) fail("missing ']'");
    if (i != s.size()) fail("trailing characters");
    return dims;
}

std::vector<std::map<std::string, std::vector<std::size_t>>> parse_shape_sets(const std::string& text) {
    auto fail = [&](const std::string& why) -> void {
        throw usage_error("--shapes: " + why + " in '" + text +
                          "' (expected e.g. \"input_ids=1x1,1x17\" or \"ids=1x7,mask=1x7;ids=1x33,mask=1x33\")");
    };
    auto split = [](const std::string& s, char sep) {
        std::vector<std::string> parts;
        std::string cur;
        for (char c : s) {
            if (c == sep) parts.push_back(cur), cur.clear();
            else if (!std::isspace(static_cast<unsigned char>(c))) cur += c;
        }
        parts.push_back(cur);
        return parts;
    };
    auto dims_of = [&](const std::string& d) {
        std::vector<std::size_t> dims;
        for (auto& n : split(d, 'x')) {
            if (n.empty() || !std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c); }))
                fail("'" + d + "' is not a shape like 2x128");
            dims.push_back(to_size("--shapes", n));
        }
        return dims;
    };
    std::vector<std::map<std::string, std::vector<std::size_t>>> sets;
    for (auto& group : split(text, ';')) {
        if (group.empty()) fail("an empty group");
        std::vector<std::pair<std::string, std::vector<std::vector<std::size_t>>>> lists;  // in the order given
        for (auto& item : split(group, ',')) {
            if (item.empty()) fail("an empty item");
            auto eq = item.find('=');
            if (eq == std::string::npos) {
                if (lists.empty()) fail("shape '" + item + "' before any input name");
                lists.back().second.push_back(dims_of(item));
                continue;
            }
            auto name = item.substr(0, eq);
            if (name.empty()) fail("a shape without an input name");
            for (auto& l : lists)
                if (l.first == name) fail("input '" + name + "' named twice in one group");
            lists.push_back({name, {dims_of(item.substr(eq + 1))}});
        }
        std::size_t count = 1;
        for (auto& [name, shapes] : lists) {
            if (shapes.size() == 1) continue;
            if (count != 1 && shapes.size() != count)
                fail("input '" + name + "' has " + std::to_string(shapes.size()) + " shapes, another input of its group " +
                     std::to_string(count));
            count = shapes.size();
        }
        for (std::size_t k = 0; k < count; ++k) {
            std::map<std::string, std::vector<std::size_t>> set;
            for (auto& [name, shapes] : lists) set[name] = shapes[shapes.size() == 1 ? 0 : k];
            sets.push_back(std::move(set));
        }
    }
    return sets;
}

options parse(const std::string& command, const std::vector<std::string>& args) {
    const auto* spec = find_command(command);
    if (!spec) throw usage_error("unknown command '" + command + "' (see kiln --help)");
    options o;
    o.command = command;
    auto allowed = [&](const std::string& name) {
        return std::find(spec->option_names.begin(), spec->option_names.end(), name) != spec->option_names.end();
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string a = args[i];
        std::string inline_value;
        bool has_inline = false;
        if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
            inline_value = a.substr(a.find('=') + 1);
            a = a.substr(0, a.find('='));
            has_inline = true;
        }
        if (a.empty() || a[0] != '-') {
            if (!spec->takes_model) throw usage_error(command + " takes no model");
            if (!o.model.empty()) throw usage_error("more than one model given ('" + o.model + "' and '" + a + "')");
            o.model = a;
            continue;
        }
        if (!allowed(a)) {
            find_option(a);  // unknown options get their own message
            throw usage_error("option " + a + " does not apply to '" + command + "'");
        }
        auto value = [&]() -> std::string {
            if (has_inline) return inline_value;
            if (i + 1 >= args.size()) throw usage_error(a + " needs a value (" + find_option(a).syntax + ")");
            return args[++i];
        };
        if (a == "--target") o.target = value(), o.target_given = true;
        else if (a == "--batch" || a == "--default-dim-value") {
            o.default_dim_value = o.batch = to_size(a, value());
            // 0 would mean "not given" below; an empty batch is --input-dim's business.
            if (o.batch == 0) throw usage_error(a + " must be at least 1");
        }
        else if (a == "--input-dim") {
            auto name = input_name(a, value());
            std::vector<std::size_t> dims;
            while (i + 1 < args.size() && !args[i + 1].empty() && std::isdigit(static_cast<unsigned char>(args[i + 1][0])))
                dims.push_back(to_size(a, args[++i]));
            if (dims.empty()) throw usage_error("--input-dim @" + name + " needs its dimensions");
            o.input_dims[name] = dims;
        } else if (a == "--default-dyn-dim") {
            auto dims = parse_dyn_dims("[" + value() + "]", a);
            if (dims.size() != 1) throw usage_error("--default-dyn-dim takes one range, e.g. {min:0,max:480000}");
            o.default_dyn_dim = dims.front();
        } else if (a == "--dyn-input-dim") {
            auto name = input_name(a, value());
            o.dyn_input_dims[name] = parse_dyn_dims(value(), a);
        } else if (a == "--fp16") o.fp16 = true;
        else if (a == "--bf16") o.bf16 = true;
        else if (a == "--int8") o.int8 = true;
        else if (a == "--fp8") o.fp8 = true;
        else if (a == "--int4-weights") o.int4_weights = true;
        else if (a == "--calibration") o.calibration = value();
        else if (a == "--calibration-method") {
            o.calibration_method = value();
            if (o.calibration_method != "minmax" && o.calibration_method != "percentile" && o.calibration_method != "entropy")
                throw usage_error("--calibration-method is minmax, percentile or entropy, not '" + o.calibration_method + "'");
        } else if (a == "--int8-residual-adds") {
            o.int8_residual_adds = value();
            if (o.int8_residual_adds != "fuse" && o.int8_residual_adds != "quant_add" && o.int8_residual_adds != "float")
                throw usage_error("--int8-residual-adds is fuse, quant_add or float, not '" + o.int8_residual_adds + "'");
        } else if (a == "--dump-scales") o.dump_scales = value();
        else if (a == "--fast-math") o.fast_math = true;
        else if (a == "--no-fast-math") o.fast_math = false;
        else if (a == "--exhaustive-tune") o.exhaustive_tune = true;
        else if (a == "--device-id") o.device_id = static_cast<int>(to_size(a, value()));
        else if (a == "--gpu-arch") o.gpu_arch = value();
        else if (a == "--tf32") o.tf32 = true;
        else if (a == "--offload-copy") o.offload_copy = true;
        else if (a == "--no-offload-copy") o.offload_copy = false;
        else if (a == "--threads") o.threads = to_size(a, value());
        else if (a == "--specialize-after") o.specialize_after = to_size(a, value());
        else if (a == "--max-specializations") o.max_specializations = to_size(a, value());
        else if (a == "--dynamic-buckets") {
            auto text = value();
            auto eq = text.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
                throw usage_error("--dynamic-buckets wants NAME=N,N,... (e.g. batch=1,2,4,8), got '" + text + "'");
            dim_buckets b;
            b.dim = text.substr(0, eq);
            std::size_t start = eq + 1;
            while (start <= text.size()) {
                auto comma = text.find(',', start);
                auto item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                b.sizes.push_back(to_size(a, item));
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
            o.dynamic_buckets.push_back(std::move(b));
        }
        else if (a == "-n" || a == "--iterations") o.iterations = std::max<std::size_t>(1, to_size(a, value()));
        else if (a == "--warmup") o.warmup = to_size(a, value());
        else if (a == "--seed") o.seed = to_size(a, value());
        else if (a == "--atol" || a == "--rtol") {
            double& tol = a == "--atol" ? o.atol : o.rtol;
            tol = to_double(a, value());
            if (!(tol >= 0)) throw usage_error(a + " must be a number >= 0");
        }
        else if (a == "--json") o.json = true;
        else if (a == "--quiet") o.quiet = true;
        else if (a == "-o") o.output_file = value();
        else if (a == "--input") o.input_dir = value();
        else if (a == "--input-file") {
            auto name = input_name(a, value());
            o.input_files[name] = value();
        } else if (a == "--output") o.output_dir = value();
        else if (a == "--output-npy") o.output_npy_dir = value();
        else if (a == "--expected") o.expected_dir = value();
        else if (a == "--optimize") o.optimize = true;
        else if (a == "--passes") o.passes = value();
        else if (a == "--per-instruction") o.per_instruction = true;
        else if (a == "--shapes") o.shape_sets = parse_shape_sets(value());
        else if (a == "--model-repository") o.model_repository = value();
        else if (a == "--host") o.host = value();
        else if (a == "--http-port" || a == "--metrics-port" || a == "--grpc-port") {
            auto port = to_size(a, value());
            if (port > 65535) throw usage_error(a + " must be a port number (0 to 65535)");
            (a == "--http-port" ? o.http_port : a == "--grpc-port" ? o.grpc_port : o.metrics_port) = static_cast<int>(port);
        } else if (a == "--model-control-mode") {
            o.model_control_mode = value();
            if (o.model_control_mode != "none" && o.model_control_mode != "explicit" && o.model_control_mode != "poll")
                throw usage_error("--model-control-mode must be none, explicit or poll");
        } else if (a == "--load-model") o.load_models.push_back(value());
        else if (a == "--auth-token-env") o.auth_token_env = value();
        else if (a == "--auth-token-file") o.auth_token_file = value();
        else if (a == "--tls-cert") o.tls_cert = value();
        else if (a == "--tls-key") o.tls_key = value();
        else if (a == "--repository-poll-secs") {
            auto secs = to_size(a, value());
            if (secs < 1 || secs > 86400) throw usage_error("--repository-poll-secs must be 1 to 86400");
            o.repository_poll_secs = static_cast<int>(secs);
        } else if (a == "--max-message-mb") {
            o.max_message_mb = to_size(a, value());
            if (o.max_message_mb < 1 || o.max_message_mb > 2047) throw usage_error("--max-message-mb must be 1 to 2047");
        } else if (a == "--exit-timeout-secs") o.exit_timeout_secs = static_cast<int>(std::min<std::size_t>(to_size(a, value()), 86400));
        else if (a == "--http-threads") o.http_threads = std::max<std::size_t>(1, to_size(a, value()));
        else throw usage_error("unknown option " + a);
    }
    if (spec->takes_model && o.model.empty()) throw usage_error(command + " needs a model (.onnx or .kiln)");
    if (command == "compile" && o.output_file.empty()) throw usage_error("compile needs -o FILE.kiln");
    if (command == "serve" && o.model_repository.empty()) throw usage_error("serve needs --model-repository DIR");
    if (!o.load_models.empty() && o.model_control_mode != "explicit")
        throw usage_error("--load-model needs --model-control-mode explicit");
    if (!o.shape_sets.empty() && o.per_instruction)
        throw usage_error("--per-instruction and --shapes do not combine (profile one shape at a time)");
    return o;
}

std::string command_help(const command_spec& c) {
    std::ostringstream ss;
    ss << "usage: kiln " << c.name << (c.takes_model ? " <model.onnx|model.kiln>" : "") << " [options]\n\n"
       << c.summary << "\n";
    if (!c.option_names.empty()) ss << "\noptions:\n";
    for (auto& n : c.option_names) {
        const auto& o = find_option(n);
        std::string left = "  " + o.name + (o.syntax.empty() ? "" : " " + o.syntax);
        if (left.size() < 34) left.resize(34, ' ');
        else left += "\n" + std::string(34, ' ');
        ss << left << o.help << (o.fallback.empty() ? "" : " (default: " + o.fallback + ")") << "\n";
    }
    ss << "  --help                          this text\n";
    return ss.str();
}

std::string general_help() {
    std::ostringstream ss;
    ss << "usage: kiln <command> [<model>] [options]\n\n"
          "Kiln compiles ONNX models and runs them. A model is an .onnx file or a saved .kiln program\n"
          "(recognised by its content).\n\ncommands:\n";
    for (auto& c : commands()) {
        std::string left = "  " + c.name;
        left.resize(12, ' ');
        ss << left << c.summary << "\n";
    }
    ss << "\n`kiln <command> --help` lists a command's options.\n"
          "exit codes: 0 success, 1 verify mismatch, 2 usage error, 3 model error (parse, unsupported, shape),\n"
          "4 runtime error\n";
    return ss.str();
}

}  // namespace kiln::cli
