// kiln.program and the module-level functions: parse, compile, run, save, load.
// The GIL is released while compiling and running, so Python threads can run
// compiled programs concurrently.
#include "bindings.hpp"

#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <pybind11/stl.h>

#include <future>
#include <map>
#include <sstream>

namespace kiln::python {

namespace {

using program_ptr = std::shared_ptr<program>;

py::dict shapes_in_order(const std::vector<std::string>& names, const std::function<shape(std::size_t)>& get) {
    py::dict d;  // Python dicts keep insertion order: the model's order
    for (std::size_t i = 0; i < names.size(); ++i) d[py::str(names[i])] = get(i);
    return d;
}

param_map to_params(const program& p, const py::dict& inputs) {
    param_map params;
    auto shapes = p.get_parameter_shapes();
    for (auto& [k, v] : inputs) {
        auto name = k.cast<std::string>();
        auto it = shapes.find(name);
        if (it == shapes.end()) {
            params[name] = argument();  // program::eval names the unknown input and lists the known ones
            continue;
        }
        std::string what = "input '" + name + "'";
        const auto& declared = it->second;
        if (declared.is_tensor() && !py::isinstance<argument>(v)) {
            py::array arr = py::array::ensure(v);
            if (arr && arr.dtype().kind() != 'U' && arr.dtype().kind() != 'O') {
                // Raw uint views may stand for bf16/fp8 inputs; anything else must match.
                auto t = type_from_dtype(arr.dtype(), what);
                auto want = declared.get_type();
                // Types numpy lacks (bf16, fp8, int4...) come as raw uint/int views of the same width.
                bool raw_view = t != want && arr.dtype().num() == numpy_dtype(want).num() &&
                                (want == type::bfloat16 || is_fp8(want) || want == type::float4e2m1 ||
                                 want == type::int4 || want == type::uint4 || want == type::int2 || want == type::uint2);
                if (t != want && !raw_view)
                    throw_error(error_code::type, what + ": expected dtype " + std::string(type_name(want)) + " (" +
                                                      declared.to_string() + "), got numpy " +
                                                      py::str(static_cast<py::handle>(arr.dtype())).cast<std::string>());
                params[name] = argument_from_python(arr, what.c_str(), want);
                continue;
            }
        }
        params[name] = argument_from_python(v, what.c_str());
    }
    return params;
}

std::vector<argument> run(const program& p, const py::dict& inputs) {
    auto params = to_params(p, inputs);
    py::gil_scoped_release release;
    return p.eval(params);
}

class async_result {
public:
    explicit async_result(std::shared_future<std::vector<argument>> f) : f_(std::move(f)) {}
    std::vector<argument> result() {
        py::gil_scoped_release release;
        return f_.get();
    }
    bool done() const { return f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

private:
    std::shared_future<std::vector<argument>> f_;
};

// A dim given as a dynamic_dimension, a {"min", "max", "optimals"} dict or a size.
dynamic_dimension to_dynamic_dimension(py::handle d) {
    if (py::isinstance<dynamic_dimension>(d)) return d.cast<dynamic_dimension>();
    if (py::isinstance<py::dict>(d)) {
        auto m = d.cast<py::dict>();
        dynamic_dimension x{m["min"].cast<std::size_t>(), m["max"].cast<std::size_t>(), {}};
        if (m.contains("optimals"))
            for (auto& opt : m["optimals"]) x.optimals.insert(opt.cast<std::size_t>());
        return x;
    }
    auto n = d.cast<std::size_t>();
    return dynamic_dimension{n, n, {}};
}

onnx_options make_onnx_options(const py::kwargs& kw) {
    onnx_options o;
    for (auto& [k, v] : kw) {
        auto key = k.cast<std::string>();
        if (v.is_none()) continue;
        if (key == "default_dim_value") o.default_dim_value = v.cast<std::size_t>();
        else if (key == "default_dyn_dim_value") o.default_dyn_dim_value = to_dynamic_dimension(v);
        else if (key == "map_input_dims") o.map_input_dims = v.cast<std::unordered_map<std::string, std::vector<std::size_t>>>();
        else if (key == "map_dyn_input_dims") {
            for (auto& [name, dims] : v.cast<py::dict>()) {
                std::vector<dynamic_dimension> dd;
                for (auto& d : dims) dd.push_back(to_dynamic_dimension(d));
                o.map_dyn_input_dims[name.cast<std::string>()] = dd;
            }
        } else if (key == "skip_unknown_operators") o.skip_unknown_operators = v.cast<bool>();
        else if (key == "max_loop_iterations") o.max_loop_iterations = v.cast<std::size_t>();
        else if (key == "limit_max_iterations") o.limit_max_iterations = v.cast<bool>();
        else if (key == "external_data_path") o.external_data_path = v.cast<std::string>();
        else throw_error(error_code::invalid_argument, "parse_onnx: unknown option '" + key + "'");
    }
    return o;
}

}  // namespace

void bind_program(py::module_& m) {
    py::class_<async_result>(m, "async_result", "The pending result of program.run_async().")
        .def("result", &async_result::result, "Waits for the run and returns its outputs (raises its error).")
        .def("done", &async_result::done);

    py::class_<program, program_ptr>(m, "program", "A model: parsed, then compiled for a target, then run.")
        .def("get_inputs", [](const program& p) {
            auto names = p.get_parameter_names();
            auto shapes = p.get_parameter_shapes();
            return shapes_in_order(names, [&](std::size_t i) { return shapes.at(names[i]); });
        }, "Inputs in model order: {name: kiln.shape}.")
        .def("get_outputs", [](const program& p) {
            auto shapes = p.get_output_shapes();
            return shapes_in_order(p.get_output_names(), [&](std::size_t i) { return shapes.at(i); });
        }, "Outputs in model order: {name: kiln.shape}.")
        .def("get_parameter_names", &program::get_parameter_names)
        .def("get_parameter_shapes", [](const program& p) {
            auto names = p.get_parameter_names();
            auto shapes = p.get_parameter_shapes();
            return shapes_in_order(names, [&](std::size_t i) { return shapes.at(names[i]); });
        })
        .def("get_output_shapes", &program::get_output_shapes)
        .def("get_output_names", &program::get_output_names)
        .def("compile", [](program& p, const std::shared_ptr<const target>& t, bool offload_copy, int device_id,
                           bool fast_math, bool exhaustive_tune, std::size_t max_specializations,
                           std::size_t specialize_after,
                           const std::map<std::string, std::vector<std::size_t>>& dynamic_buckets, bool tf32,
                           const std::string& gpu_arch) {
            compile_options o;
            o.tf32 = tf32;
            o.gpu_arch = gpu_arch;
            o.offload_copy = offload_copy;
            o.device_id = device_id;
            o.fast_math = fast_math;
            o.exhaustive_tune = exhaustive_tune;
            o.max_specializations = max_specializations;
            o.specialize_after = specialize_after;
            for (auto& [dim, sizes] : dynamic_buckets) o.dynamic_buckets.push_back({dim, sizes});
            py::gil_scoped_release release;
            p.compile(*t, o);
        }, py::arg("target"), py::arg("offload_copy") = true, py::arg("device_id") = 0, py::arg("fast_math") = true,
           py::arg("exhaustive_tune") = false, py::arg("max_specializations") = compile_options{}.max_specializations,
           py::arg("specialize_after") = compile_options{}.specialize_after,
           py::arg("dynamic_buckets") = std::map<std::string, std::vector<std::size_t>>{}, py::arg("tf32") = false,
           py::arg("gpu_arch") = "",
           "Compiles for a target (kiln.get_target('cpu')). A program with dynamic inputs compiles once into a "
           "generic program that runs every shape in range; a set of input shapes seen specialize_after times "
           "(0: never) also gets a specialization compiled in the background, keeping the max_specializations "
           "most recently used (0: all). dynamic_buckets={'batch': [1, 2, 4, 8]}: sizes compiled ahead; a size in "
           "between runs padded up to the next where the model keeps that dim's rows apart. tf32=True: the gpu target's "
           "float32 products and convolutions may use TF32 tensor cores (default: strict fp32). gpu_arch='sm_90': the "
           "CUDA architecture the gpu target compiles for (ahead of time, without the device; '' the default).")
        .def("is_compiled", &program::is_compiled)
        .def("target_name", &program::target_name)
        .def("run", &run, py::arg("inputs"), "Runs with {name: numpy array or kiln.argument}; returns a list of kiln.argument.")
        .def("eval", &run, py::arg("inputs"), "Same as run().")
        .def("run_async", [](const program_ptr& p, const py::dict& inputs) {
            auto params = to_params(*p, inputs);
            auto f = std::async(std::launch::async, [p, params]() { return p->eval(params); });
            return async_result(f.share());
        }, py::arg("inputs"), "Starts a run on another thread and returns at once; result() waits for it.")
        .def("get_memory_usage", [](const program& p) {
            auto u = p.get_memory_usage();
            py::dict d;
            d["arena_bytes"] = u.arena_bytes;
            d["parameter_bytes"] = u.parameter_bytes;
            d["literal_bytes"] = u.literal_bytes;
            d["output_bytes"] = u.output_bytes;
            return d;
        }, "Bytes of the planned arena, the inputs, the weights and the outputs (a dynamic program: of the "
           "specialization that ran last).")
        .def("run_note", &program::run_note,
             "How the target ran the last run (the cpu target: its threads, whether on a thread team, and what "
             "its trial of those ways measured).")
        .def("warming_up", &program::warming_up,
             "Whether the target is still trying out how to run this program (the cpu target's first runs try "
             "a thread team and no team, some of them slower on purpose): a benchmark keeps warming up until "
             "False.")
        .def("get_specialization_stats", [](const program& p) {
            auto s = p.get_specialization_stats();
            py::dict d;
            d["compiles"] = s.compiles;
            d["failed_compiles"] = s.failed_compiles;
            d["cached"] = s.cached;
            d["evictions"] = s.evictions;
            d["hits"] = s.hits;
            d["max_specializations"] = s.max_specializations;
            d["compile_ms"] = s.compile_ms;
            d["generic"] = s.generic;
            d["generic_runs"] = s.generic_runs;
            d["background_compiles"] = s.background_compiles;
            d["generic_unavailable"] = s.generic_unavailable;
            d["padded_runs"] = s.padded_runs;
            return d;
        }, "A dynamic program's specializations: compiles so far (background_compiles of them in the background), "
           "failed_compiles, cached now, evictions, hits, max_specializations (0: unbounded), compile_ms, whether "
           "a generic program serves the other shapes (generic; generic_unavailable says why not) and "
           "generic_runs (all zero for a static program).")
        .def("finish_specializations", [](const program& p) {
            py::gil_scoped_release release;
            p.finish_specializations();
        }, "Waits for the specializations being compiled in the background.")
        .def("sort", [](program&) {}, "Kept for MIGraphX compatibility: Kiln programs are always in topological order.")
        .def("print", [](const program& p) { py::print(p.to_string()); })
        .def("__str__", &program::to_string)
        .def("__eq__", [](const program& a, const program& b) { return a == b; });

    m.def("parse_onnx", [](const py::object& source, const py::kwargs& kw) {
        auto opts = make_onnx_options(kw);
        if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source)) {
            std::string bytes = py::isinstance<py::bytes>(source) ? source.cast<std::string>()
                                                                   : std::string(py::bytes(source));
            py::gil_scoped_release release;
            return std::make_shared<program>(parse_onnx_buffer(bytes.data(), bytes.size(), opts));
        }
        auto path = py::str(source).cast<std::string>();
        py::gil_scoped_release release;
        return std::make_shared<program>(parse_onnx(path, opts));
    }, py::arg("model"),
          "parse_onnx(path_or_bytes, default_dim_value=, default_dyn_dim_value=, map_input_dims=, map_dyn_input_dims=, "
          "skip_unknown_operators=, max_loop_iterations=, limit_max_iterations=, external_data_path=)");
    m.def("load", [](const std::string& path, std::optional<int> device_id) {
        load_options o;
        o.device_id = device_id;
        py::gil_scoped_release release;
        return std::make_shared<program>(load(path, o));
    }, py::arg("path"), py::arg("device_id") = py::none(), "Loads a .kiln program (compiled programs are ready to run).");
    m.def("save", [](const program& p, const std::string& path) {
        py::gil_scoped_release release;
        save(p, path);
    }, py::arg("program"), py::arg("path"), "Saves a program as .kiln (atomically).");
    m.def("get_target", &get_target, py::arg("name"), "A target by name: 'ref', 'cpu' or 'gpu'.");
    m.def("targets", &get_target_names, "Names of the targets in this build.");
    m.def("onnx_operators", &get_onnx_operators, "The ONNX operators the frontend supports.");
    m.def("read_tensor_proto", &read_tensor_proto, py::arg("path"), "Reads an ONNX TensorProto file (.pb).");
    m.def("write_tensor_proto", [](const py::object& value, const std::string& name, const std::string& path) {
        write_tensor_proto(argument_from_python(value, "write_tensor_proto"), name, path);
    }, py::arg("value"), py::arg("name"), py::arg("path"), "Writes an ONNX TensorProto file (.pb).");
    py::class_<target, std::shared_ptr<target>>(m, "target")
        .def("name", &target::name)
        .def("unavailable_reason", &target::unavailable_reason)
        .def("__repr__", [](const target& t) { return "kiln.target('" + t.name() + "')"; });
    m.def("quantize_fp16", [](program& p, const std::vector<std::string>& ops) { quantize_fp16(p, ops); },
          py::arg("program"), py::arg("ops") = std::vector<std::string>{"all"},
          "Before compile: the ops compute in float16; inputs and outputs stay float32.");
    m.def("quantize_bf16", [](program& p, const std::vector<std::string>& ops) { quantize_bf16(p, ops); },
          py::arg("program"), py::arg("ops") = std::vector<std::string>{"all"},
          "Before compile: the ops compute in bfloat16; inputs and outputs stay float32.");
    // quantize_int8 and quantize_fp8 take the same calibration arguments.
    auto calibrated = [](const char* fname, int8_summary (*f)(program&, const target&, const std::vector<param_map>&,
                                                              const int8_options&)) {
        return [fname, f](program& p, const py::object& t, const py::iterable& calibration,
                          const std::vector<std::string>& ops, const std::string& method, double percentile,
                          const std::optional<std::string>& dump_scales, const std::string& residual_adds) {
            std::shared_ptr<const target> tg = py::isinstance<py::str>(t) ? get_target(t.cast<std::string>())
                                                                          : t.cast<std::shared_ptr<target>>();
            std::vector<param_map> sets;
            for (auto item : calibration) {
                if (!py::isinstance<py::dict>(item))
                    throw_error(error_code::invalid_argument,
                                std::string(fname) + ": calibration is a list of dicts {input name: array}");
                sets.push_back(to_params(p, item.cast<py::dict>()));
            }
            int8_options o;
            o.ops = ops;
            o.method = calibration_method_from_name(method);
            o.percentile = percentile;
            if (dump_scales) o.dump_scales = *dump_scales;
            set_residual_adds(o, residual_adds);
            int8_summary s;
            {
                py::gil_scoped_release release;
                s = f(p, *tg, sets, o);
            }
            py::dict d;
            d["quantized_ops"] = s.quantized_ops;
            d["quantized_adds"] = s.quantized_adds;
            d["residual_convolutions"] = s.residual_convolutions;
            d["activation_tensors"] = s.activation_tensors;
            d["calibration_runs"] = s.calibration_runs;
            d["skipped"] = s.skipped;
            d["seconds"] = s.seconds;
            return d;
        };
    };
    m.def("quantize_int8", calibrated("quantize_int8", &quantize_int8),
          py::arg("program"), py::arg("target"), py::arg("calibration"),
          py::arg("ops") = std::vector<std::string>{"convolution", "dot"}, py::arg("method") = "minmax",
          py::arg("percentile") = 99.99, py::arg("dump_scales") = py::none(), py::arg("residual_adds") = "fuse",
          "Before compile: int8 calibrated on the input sets (a list of dicts {input name: array}); "
          "method 'minmax', 'percentile' or 'entropy'; residual_adds 'fuse' (summed into the convolution before "
          "them), 'quant_add' (8-bit adds) or 'float'. Returns what was done (ops quantized, ops skipped).");
    m.def("quantize_fp8", calibrated("quantize_fp8", &quantize_fp8),
          py::arg("program"), py::arg("target"), py::arg("calibration"),
          py::arg("ops") = std::vector<std::string>{"convolution", "dot"}, py::arg("method") = "minmax",
          py::arg("percentile") = 99.99, py::arg("dump_scales") = py::none(), py::arg("residual_adds") = "fuse",
          "Before compile: float8 e4m3fn activations and weights, per-tensor scales calibrated on the input "
          "sets (as quantize_int8). Returns what was done.");
    m.def("quantize_int4_weights", [](program& p, std::size_t block_size) {
              const auto s = quantize_int4_weights(p, block_size);
              py::dict d;
              d["quantized_ops"] = s.quantized_ops;
              d["weight_bytes_before"] = s.weight_bytes_before;
              d["weight_bytes_after"] = s.weight_bytes_after;
              d["skipped"] = s.skipped;
              return d;
          },
          py::arg("program"), py::arg("block_size") = 32,
          "Before compile: int4 weights (symmetric, one float32 scale per block of block_size along K) for every "
          "matmul/gemm with constant 2-D weights. Returns what was done.");
}

}  // namespace kiln::python
