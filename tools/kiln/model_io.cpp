#include "model_io.hpp"

#include <kiln/errors.hpp>
#include <kiln/onnx.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <random>

namespace kiln::cli {

namespace fs = std::filesystem;

bool is_kiln_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    char magic[4] = {};
    f.read(magic, 4);
    return f.gcount() == 4 && std::memcmp(magic, "KILN", 4) == 0;
}

namespace {
// A path the user typed that is not there is a usage error (exit 2), not a model error.
void require_file(const std::string& path, const std::string& what) {
    if (!fs::exists(path)) throw_error(error_code::invalid_argument, what + " '" + path + "' does not exist");
    if (fs::is_directory(path)) throw_error(error_code::invalid_argument, what + " '" + path + "' is a folder, not a file");
}
}  // namespace

program load_model(const options& o) {
    require_file(o.model, "model file");
    if (is_kiln_file(o.model)) {
        // Its shapes were fixed when it was compiled: ignoring the option would run other
        // shapes than the user asked for.
        if (o.default_dim_value > 0 || o.default_dyn_dim || !o.input_dims.empty() || !o.dyn_input_dims.empty())
            throw_error(error_code::invalid_argument,
                        "'" + o.model + "' is a saved .kiln program: --batch, --default-dim-value, --default-dyn-dim, "
                                        "--input-dim and --dyn-input-dim apply to .onnx models only (compile the "
                                        ".onnx with them)");
        return load(o.model);
    }
    onnx_options opts;
    if (o.default_dim_value > 0) opts.default_dim_value = o.default_dim_value;
    if (o.default_dyn_dim) opts.default_dyn_dim_value = *o.default_dyn_dim;
    for (auto& [k, v] : o.input_dims) opts.map_input_dims[k] = v;
    for (auto& [k, v] : o.dyn_input_dims) opts.map_dyn_input_dims[k] = v;
    auto p = parse_onnx(o.model, opts);
    for (auto& [k, v] : o.input_dims)
        if (p.get_main_module()->get_parameter(k) == p.get_main_module()->end())
            throw_error(error_code::invalid_argument, "--input-dim @" + k + ": the model has no input named '" + k + "'");
    // Inputs read from files decide the dims the model leaves open (symbolic or unknown)
    // of inputs the user did not size: parse again when they differ from the defaults
    // (e.g. a batch-8 test set). A dim the model declares is never resized: a file that
    // disagrees is a shape error (exit 3). With --batch, the open dims are the user's
    // choice too, and a file that disagrees is a usage error (exit 2): running either
    // size silently would not be what one of the two asked for.
    if (o.input_dir.empty() && o.input_files.empty()) return p;
    auto names = p.get_parameter_names();
    auto shapes = p.get_parameter_shapes();
    const auto* declared_inputs = p.get_metadata().is_object() ? p.get_metadata().find("declared_input_dims") : nullptr;
    std::string resized;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto& n = names[i];
        if (o.input_dims.count(n) || o.dyn_input_dims.count(n) || !shapes.at(n).is_tensor() || shapes.at(n).dynamic())
            continue;
        std::string file;
        if (auto it = o.input_files.find(n); it != o.input_files.end()) file = it->second;
        else if (!o.input_dir.empty()) file = (fs::path(o.input_dir) / ("input_" + std::to_string(i) + ".pb")).string();
        if (file.empty() || !fs::exists(file)) continue;
        auto a = file.size() > 4 && file.substr(file.size() - 4) == ".npy" ? read_npy(file) : read_tensor_proto(file);
        const auto& lens = a.get_shape().lens();
        const value* declared = declared_inputs && declared_inputs->is_object() ? declared_inputs->find(n) : nullptr;
        if (declared && declared->is_array()) {
            const auto& dims = declared->get_array();
            std::string text = std::string(type_name(shapes.at(n).get_type())) + "[";
            bool open = false;
            for (std::size_t d = 0; d < dims.size(); ++d) {
                open = open || !dims[d].is_integer();
                text += (d ? ", " : "") + (dims[d].is_integer() ? std::to_string(dims[d].get_int64()) : std::string("?"));
            }
            text += "]";
            bool fits = dims.size() == lens.size();
            for (std::size_t d = 0; fits && d < dims.size(); ++d)
                fits = !dims[d].is_integer() || static_cast<std::size_t>(dims[d].get_int64()) == lens[d];
            if (!fits)
                throw_error(error_code::shape, "input '" + n + "': the model declares " + text +
                                                   (open ? " ('?': any size)" : "") + ", but '" +
                                                   file + "' holds " + a.get_shape().to_string() +
                                                   " (a declared dimension is never resized to fit an input)");
            for (std::size_t d = 0; o.batch > 0 && d < dims.size(); ++d)
                if (!dims[d].is_integer() && lens[d] != o.batch)
                    throw_error(error_code::invalid_argument,
                                "--batch " + std::to_string(o.batch) + " sizes dimension " + std::to_string(d) +
                                    " of input '" + n + "' (" + text + ") to " + std::to_string(o.batch) + ", but '" +
                                    file + "' holds " + a.get_shape().to_string() +
                                    ": give inputs of that size, or leave --batch out to take the input's size");
        }
        if (lens != shapes.at(n).lens()) {
            opts.map_input_dims[n] = lens;
            resized += (resized.empty() ? "" : ", ") + n + " " + a.get_shape().to_string() + " (model: " +
                       shapes.at(n).to_string() + ")";
        }
    }
    if (resized.empty()) return p;
    try {
        return parse_onnx(o.model, opts);
    } catch (const error& e) {
        // Say which input files changed the shapes: the model alone was fine.
        throw_error(e.code(), "with the shapes of the input files (" + resized + "): " + e.message());
    }
}

compile_options make_compile_options(const options& o) {
    compile_options c;
    c.offload_copy = o.offload_copy;
    c.device_id = o.device_id;
    c.gpu_arch = o.gpu_arch;
    c.tf32 = o.tf32;
    c.fast_math = o.fast_math;
    c.exhaustive_tune = o.exhaustive_tune;
    c.threads = o.threads;
    c.specialize_after = o.specialize_after;
    c.max_specializations = o.max_specializations;
    c.dynamic_buckets = o.dynamic_buckets;
    return c;
}

namespace {

// --calibration DIR: DIR/data_set_K/input_N.pb, K in numeric order, N in the model's input order.
std::vector<param_map> read_calibration(const program& p, const std::string& dir) {
    if (!fs::is_directory(dir))
        throw_error(error_code::invalid_argument, "--calibration '" + dir + "' is not a folder (of data_set_K/input_N.pb)");
    std::vector<std::pair<std::size_t, fs::path>> sets;
    for (const auto& e : fs::directory_iterator(dir)) {
        const auto name = e.path().filename().string();
        if (!e.is_directory() || name.rfind("data_set_", 0) != 0) continue;
        const auto k = name.substr(9);
        if (k.empty() || k.find_first_not_of("0123456789") != std::string::npos) continue;
        sets.emplace_back(std::stoull(k), e.path());
    }
    if (sets.empty())
        throw_error(error_code::invalid_argument, "--calibration " + dir + ": no data_set_K folders (each with input_N.pb files)");
    std::sort(sets.begin(), sets.end());
    const auto names = p.get_parameter_names();
    const auto shapes = p.get_parameter_shapes();
    std::vector<param_map> out;
    for (const auto& [k, path] : sets) {
        param_map m;
        for (std::size_t i = 0; i < names.size(); ++i) {
            auto file = path / ("input_" + std::to_string(i) + ".pb");
            if (fs::exists(file)) m[names[i]] = read_value_proto(file.string(), shapes.at(names[i]));
            else if (!p.get_parameter_default(names[i]))
                throw_error(error_code::invalid_argument, "--calibration " + dir + ": no " + file.filename().string() +
                                                              " in " + path.filename().string() + " for input '" +
                                                              names[i] + "'");
        }
        out.push_back(std::move(m));
    }
    return out;
}

// --int8 or --fp8.
void quantize_calibrated_from_options(program& p, const options& o, const target& t) {
    const std::string mode = o.fp8 ? "fp8" : "int8";
    std::vector<param_map> sets;
    if (!o.calibration.empty()) {
        sets = read_calibration(p, o.calibration);
    } else {
        std::cerr << "\n*** WARNING: --" << mode << " without --calibration DIR: calibrating on ONE set of RANDOM inputs.\n"
                     "*** The scales fit noise, not your data: the accuracy of this " << mode << " program means NOTHING.\n"
                     "*** Give --calibration DIR (data_set_K/input_N.pb folders of real inputs).\n\n";
        options ro = o;
        ro.input_dir.clear();
        ro.input_files.clear();
        ro.seed = o.seed + 1000;  // not the inputs a run or verify is given
        sets.push_back(make_inputs(p, ro));
    }
    int8_options q;
    q.method = calibration_method_from_name(o.calibration_method);
    q.dump_scales = o.dump_scales;
    set_residual_adds(q, o.int8_residual_adds);
    const bool bar = !o.quiet && isatty(2);
    if (bar)
        q.progress = [](std::size_t done, std::size_t total) {
            const std::size_t width = 30, filled = total ? width * done / total : width;
            std::cerr << "\rcalibrating [" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done
                      << "/" << total << (done == total ? "\n" : "") << std::flush;
        };
    auto s = o.fp8 ? quantize_fp8(p, t, sets, q) : quantize_int8(p, t, sets, q);
    if (!o.quiet) {
        std::cerr << mode << ": " << s.quantized_ops << " ops quantized";
        if (s.quantized_adds) {
            std::cerr << " (and " << s.quantized_adds << " residual adds";
            if (s.residual_convolutions) std::cerr << ", " << s.residual_convolutions << " fused into their convolutions";
            std::cerr << ")";
        }
        std::cerr << ", " << s.activation_tensors << " activations calibrated ("
                  << calibration_method_name(q.method) << ", " << sets.size() << " set" << (sets.size() == 1 ? "" : "s")
                  << ") in " << std::fixed << std::setprecision(2) << s.seconds << " s" << std::defaultfloat;
        if (!s.skipped.empty()) std::cerr << "; " << s.skipped.size() << " left float32 (e.g. " << s.skipped.front() << ")";
        if (!o.dump_scales.empty()) std::cerr << "; scales written to " << o.dump_scales;
        std::cerr << "\n";
    }
}

}  // namespace

void compile_model(program& p, const options& o, bool target_given) {
    const bool calibrated = o.int8 || o.fp8;
    if (!calibrated && (!o.calibration.empty() || !o.dump_scales.empty() || o.calibration_method != "minmax"))
        throw_error(error_code::invalid_argument, "--calibration, --calibration-method and --dump-scales need --int8 or --fp8");
    if (!o.int8 && o.int8_residual_adds != "fuse")
        throw_error(error_code::invalid_argument, "--int8-residual-adds needs --int8");
    if (int(o.fp16) + int(o.bf16) + int(o.int8) + int(o.fp8) + int(o.int4_weights) > 1)
        throw_error(error_code::invalid_argument, "--fp16, --bf16, --int8, --fp8 and --int4-weights exclude each other");
    // Modes that quantize before compile: a compiled .kiln must have been made with the same one.
    const char* flag = o.int8 ? "--int8" : o.fp8 ? "--fp8" : o.int4_weights ? "--int4-weights" : nullptr;
    const type mode = o.int8 ? type::int8 : o.fp8 ? type::float8e4m3fn : type::int4;
    if (flag && p.is_compiled()) {
        if (quantized_type(p) != mode)
            throw_error(error_code::invalid_argument, "'" + o.model + "' was compiled in " +
                                                          std::string(type_name(quantized_type(p))) + ", not with " +
                                                          flag + " (quantize the .onnx)");
        if (!o.calibration.empty() || !o.dump_scales.empty())
            throw_error(error_code::invalid_argument, "'" + o.model + "' is already quantized and compiled: "
                                                      "--calibration and --dump-scales apply to an .onnx");
    }
    if (o.fp16 && o.bf16) throw_error(error_code::invalid_argument, "--fp16 and --bf16 exclude each other");
    const type reduced = o.fp16 ? type::float16 : o.bf16 ? type::bfloat16 : type::float32;
    if (reduced != type::float32) {
        if (p.is_compiled() && quantized_type(p) != reduced)
            throw_error(error_code::invalid_argument, "'" + o.model + "' was compiled in " +
                                                          std::string(type_name(quantized_type(p))) + ", not with " +
                                                          (o.fp16 ? "--fp16" : "--bf16") + " (quantize the .onnx)");
        if (!p.is_compiled()) quantize_float(p, reduced);
        if (o.target == "cpu" && o.fp16)
            std::cerr << "note: --fp16: the cpu target computes in float32 with the float16 weights (no "
                         "AVX512-FP16 kernels; docs/quantization.md)\n";
    }
    if (p.is_compiled()) {
        if (target_given && p.target_name() != o.target)
            throw_error(error_code::invalid_argument, "'" + o.model + "' was compiled for " + p.target_name() +
                                                          ", not for --target " + o.target);
        return;
    }
    std::shared_ptr<const target> t;
    try {
        t = get_target(o.target);
    } catch (const error& e) {
        throw_error(e.code(), e.message() + (o.target == "gpu" ? "; this build has no gpu target (no CUDA support)" : "") +
                                  " (see kiln targets)");
    }
    if (calibrated) quantize_calibrated_from_options(p, o, *t);
    if (o.int4_weights) {
        const auto s = quantize_int4_weights(p);
        if (!o.quiet)
            std::cerr << "int4 weights: " << s.quantized_ops << " matmuls, " << std::fixed << std::setprecision(1)
                      << s.weight_bytes_before / 1024.0 << " KiB of float32 weights now " << s.weight_bytes_after / 1024.0
                      << " KiB" << std::defaultfloat
                      << (s.skipped.empty() ? std::string() : "; " + std::to_string(s.skipped.size()) + " left float32 (e.g. " +
                                                                 s.skipped.front() + ")")
                      << "\n";
    }
    p.compile(*t, make_compile_options(o));
}

namespace {
std::vector<std::size_t> concrete_dims(const shape& s) {
    if (!s.dynamic()) return s.lens();
    std::vector<std::size_t> lens;
    for (auto& d : s.dyn_dims()) {
        if (!d.optimals.empty()) lens.push_back(*d.optimals.begin());
        else lens.push_back(std::max<std::size_t>(d.min, 1));
    }
    return lens;
}
}  // namespace

argument random_argument(const shape& declared, std::uint64_t seed) {
    if (!declared.is_tensor())
        throw_error(error_code::unsupported, "cannot make random values for " + declared.to_string() +
                                                 "; pass the input with --input or --input-file");
    shape s(declared.get_type(), concrete_dims(declared));
    argument a(s);
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> real(-1.0, 1.0);
    std::uniform_int_distribution<int> small(0, 3);
    visit(a, [&](auto v) {
        using C = std::remove_reference_t<decltype(v[0])>;
        for (std::size_t i = 0; i < s.elements(); ++i) {
            if constexpr (std::is_same_v<C, std::string>) v[i] = "kiln" + std::to_string(small(gen));
            else if constexpr (std::is_same_v<C, bool>) v[i] = small(gen) % 2 == 1;
            else if constexpr (std::is_floating_point_v<compute_t<C>>) v[i] = convert<C>(real(gen));
            else v[i] = convert<C>(small(gen));
        }
    });
    return a;
}

param_map make_inputs(const program& p, const options& o) {
    param_map params;
    auto names = p.get_parameter_names();
    auto shapes = p.get_parameter_shapes();
    for (auto& [k, v] : o.input_files)
        if (!shapes.count(k)) {
            std::string known;
            for (auto& n : names) known += (known.empty() ? "" : ", ") + n;
            throw_error(error_code::invalid_argument, "--input-file @" + k + ": the model has no input '" + k +
                                                          "' (inputs: " + known + ")");
        }
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto& name = names[i];
        if (auto it = o.input_files.find(name); it != o.input_files.end()) {
            const auto& file = it->second;
            require_file(file, "--input-file @" + name + ":");
            params[name] = file.size() > 4 && file.substr(file.size() - 4) == ".npy" ? read_npy(file)
                                                                                     : read_value_proto(file, shapes.at(name));
            continue;
        }
        if (!o.input_dir.empty()) {
            auto file = fs::path(o.input_dir) / ("input_" + std::to_string(i) + ".pb");
            if (fs::exists(file)) {
                params[name] = read_value_proto(file.string(), shapes.at(name));
                continue;
            }
            if (p.get_parameter_default(name)) continue;
            throw_error(error_code::invalid_argument, "--input " + o.input_dir + ": no " + file.filename().string() +
                                                          " for input '" + name + "'");
        }
        if (p.get_parameter_default(name)) continue;
        params[name] = random_argument(shapes.at(name), o.seed + i);
    }
    return params;
}

summary summarize(const argument& a, std::size_t first_count) {
    summary s;
    const auto& sh = a.get_shape();
    if (!sh.is_tensor() || sh.get_type() == type::string || sh.dynamic()) {
        s.numeric = false;
        return s;
    }
    auto v = a.to_vector<double>();
    if (v.empty()) {
        s.numeric = false;  // no min/max/mean to report (not zeros)
        return s;
    }
    s.min = s.max = v[0];
    double sum = 0;
    for (double x : v) {
        s.min = std::min(s.min, x);
        s.max = std::max(s.max, x);
        sum += x;
    }
    s.mean = sum / static_cast<double>(v.size());
    for (std::size_t i = 0; i < v.size() && i < first_count; ++i) s.first.push_back(v[i]);
    return s;
}

void writing(const std::string& what, const std::function<void()>& step) {
    try {
        step();
    } catch (const fs::filesystem_error& e) {
        throw_error(error_code::runtime, "cannot write " + what + ": " + e.what());
    } catch (const error& e) {
        if (e.code() != error_code::io) throw;
        throw_error(error_code::runtime, "cannot write " + what + ": " + e.message());
    }
}

void write_outputs(const program& p, const std::vector<argument>& results, const options& o) {
    writing("the outputs", [&] {
        auto names = p.get_output_names();
        if (!o.output_dir.empty()) {
            fs::create_directories(o.output_dir);
            for (std::size_t i = 0; i < results.size(); ++i)
                write_value_proto(results[i], names.at(i),
                                  (fs::path(o.output_dir) / ("output_" + std::to_string(i) + ".pb")).string());
        }
        if (!o.output_npy_dir.empty()) {
            fs::create_directories(o.output_npy_dir);
            for (std::size_t i = 0; i < results.size(); ++i) {
                std::string safe = names.at(i);
                for (auto& c : safe)
                    if (c == '/' || c == '\\' || c == ':') c = '_';
                write_npy(results[i], (fs::path(o.output_npy_dir) / (safe + ".npy")).string());
            }
        }
    });
}

}  // namespace kiln::cli
