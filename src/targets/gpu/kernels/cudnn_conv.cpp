#include "targets/gpu/kernels/cudnn_conv.hpp"

#include "ops/nn_common.hpp"
#include "ops/nn_conv.hpp"
#include "passes/rewrite_utils.hpp"
#include "targets/gpu/context.hpp"
#include "targets/gpu/device.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace kiln::gpu {

shape cudnn_conv::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() != 4) throw_error(error_code::shape, "gpu::cudnn_conv: expects x, w, workspace and output");
    const auto& x = inputs[0];
    const auto& w = inputs[1];
    const auto& out = inputs[3];
    const std::size_t r = stride.size();
    if (r < 1 || r > 3 || x.ndim() != r + 2 || w.ndim() != r + 2 || out.ndim() != r + 2 || pad_begin.size() != r ||
        pad_end.size() != r || dilation.size() != r)
        throw_error(error_code::shape, "gpu::cudnn_conv: x " + x.to_string() + ", w " + w.to_string() + " and output " +
                                           out.to_string() + " do not fit " + std::to_string(r) + " spatial dims");
    if (x.lens()[1] != w.lens()[1] * static_cast<std::size_t>(group) || out.lens()[1] != w.lens()[0] ||
        out.lens()[0] != x.lens()[0])
        throw_error(error_code::shape, "gpu::cudnn_conv: channels of x " + x.to_string() + ", w " + w.to_string() +
                                           " and output " + out.to_string() + " disagree for group " +
                                           std::to_string(group));
    if (inputs[2].bytes() < cudnn_workspace_bytes)
        throw_error(error_code::shape, "gpu::cudnn_conv: workspace " + inputs[2].to_string() + " is too small");
    return out;
}

// ---------------------------------------------------------------------------------------
// cuDNN's backend descriptors, owned.

namespace {

void check_cudnn(cudnnStatus_t s, const std::string& what) {
    if (s != CUDNN_STATUS_SUCCESS)
        throw_error(error_code::runtime, "gpu: " + what + " failed: " + cudnnGetErrorString(s));
}

class backend {
public:
    backend(cudnnBackendDescriptorType_t t, const std::string& what) {
        check_cudnn(cudnnBackendCreateDescriptor(t, &d_), "cudnnBackendCreateDescriptor (" + what + ")");
    }
    backend(const backend&) = delete;
    backend& operator=(const backend&) = delete;
    backend(backend&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
    ~backend() {
        if (d_) (void)cudnnBackendDestroyDescriptor(d_);
    }
    cudnnBackendDescriptor_t get() const { return d_; }
    // Throws naming `what` and the attribute's number.
    template <class T>
    void set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, const std::vector<T>& v, const std::string& what) {
        check_cudnn(cudnnBackendSetAttribute(d_, a, t, static_cast<std::int64_t>(v.size()), v.data()),
                    "cudnnBackendSetAttribute(" + std::to_string(static_cast<int>(a)) + ") of " + what);
    }
    template <class T>
    void set1(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, T v, const std::string& what) {
        set(a, t, std::vector<T>{v}, what);
    }
    void finalize(const std::string& what) { check_cudnn(cudnnBackendFinalize(d_), "cudnnBackendFinalize of " + what); }

private:
    cudnnBackendDescriptor_t d_ = nullptr;
};

// The deprecated handle attributes are what every cuDNN 9 release reads (the device
// property descriptor that replaces them came later), and the GPU machine's cuDNN may be
// older than the headers built against.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t graph_handle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t plan_handle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

// Row-major (NC + spatial) strides of `dims`.
std::vector<std::int64_t> packed_strides(const std::vector<std::int64_t>& dims) {
    std::vector<std::int64_t> s(dims.size(), 1);
    for (std::size_t d = dims.size() - 1; d-- > 0;) s[d] = s[d + 1] * dims[d + 1];
    return s;
}

backend tensor(std::int64_t uid, const std::vector<std::int64_t>& dims, int data, const std::string& what) {
    backend t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    t.set1(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, static_cast<cudnnDataType_t>(data), what);
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims, what);
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, packed_strides(dims), what);
    t.set1(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid, what);
    t.set1(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, std::int64_t{16}, what);
    t.finalize(what);
    return t;
}

std::vector<std::int64_t> dims_of(const shape& s, bool add_height) {
    std::vector<std::int64_t> d;
    for (auto l : s.lens()) d.push_back(static_cast<std::int64_t>(l));
    if (add_height) d.insert(d.begin() + 2, 1);  // 1-D as 2-D with a height of 1
    return d;
}

cudnn_note note_of(cudnnBackendNumericalNote_t n) {
    switch (n) {
        case CUDNN_NUMERICAL_NOTE_TENSOR_CORE: return cudnn_note::tensor_core;
        case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS: return cudnn_note::down_convert_inputs;
        case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: return cudnn_note::reduced_precision_reduction;
        case CUDNN_NUMERICAL_NOTE_FFT: return cudnn_note::fft;
        case CUDNN_NUMERICAL_NOTE_WINOGRAD:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: return cudnn_note::winograd;
        default: return cudnn_note::other;
    }
}

// One heuristic result's engine, read once: its global index (for the reasons and the
// profile) and whether its numerical notes allow it for this element type
// (cudnn_note_allowed).
struct engine_info {
    std::int64_t index = -1;
    bool strict = false;
    std::string notes;  // the notes that ruled it out
};

engine_info engine_of(cudnnBackendDescriptor_t engine_cfg, type t, bool tf32) {
    engine_info info;
    backend engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine of a heuristic result");
    std::int64_t n = 0;
    cudnnBackendDescriptor_t e = engine.get();
    if (cudnnBackendGetAttribute(engine_cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
            CUDNN_STATUS_SUCCESS ||
        n != 1)
        return info;
    (void)cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &info.index);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    std::int64_t count = 0;
    if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes) != CUDNN_STATUS_SUCCESS)
        return info;
    for (std::int64_t i = 0; i < count; ++i)
        if (!cudnn_note_allowed(note_of(notes[i]), t, tf32)) info.notes += " " + std::to_string(static_cast<int>(notes[i]));
    info.strict = info.notes.empty();
    return info;
}

}  // namespace

bool cudnn_element_type(type t) { return t == type::float32 || t == type::float16 || t == type::bfloat16; }

cudnn_conv_types cudnn_types_of(type t) {
    cudnn_conv_types r;
    r.compute = CUDNN_DATA_FLOAT;
    switch (t) {
        case type::float32: r.data = CUDNN_DATA_FLOAT; r.text = "x/w/y CUDNN_DATA_FLOAT"; break;
        case type::float16: r.data = CUDNN_DATA_HALF; r.text = "x/w/y CUDNN_DATA_HALF"; break;
        case type::bfloat16: r.data = CUDNN_DATA_BFLOAT16; r.text = "x/w/y CUDNN_DATA_BFLOAT16"; break;
        default: throw_error(error_code::unsupported, "gpu::cudnn_conv: no cuDNN type for " + std::string(type_name(t)));
    }
    r.text += ", compute CUDNN_DATA_FLOAT, NCHW";
    return r;
}

bool cudnn_note_allowed(cudnn_note n, type t, bool tf32) {
    switch (n) {
        // Tensor cores: fp16/bf16 products summed in fp32 (the compute type); on float32
        // data they mean TF32, only when asked.
        case cudnn_note::tensor_core: return t != type::float32 || tf32;
        // Sums in fewer bits than fp32, inputs rounded below their type, or transforms
        // whose error grows with the values (FFT, Winograd): never.
        case cudnn_note::down_convert_inputs:
        case cudnn_note::reduced_precision_reduction:
        case cudnn_note::fft:
        case cudnn_note::winograd: return false;
        case cudnn_note::other: return true;
    }
    return false;
}

struct cudnn_conv_state {
    std::unique_ptr<backend> plan;  // null: runs on the host (host_reason says why)
    cudnnHandle_t handle = nullptr;  // the context's, which the plan was made for
    std::size_t workspace = 0;
    std::int64_t engine = -1;
    std::string host_reason;
    std::string problem;  // "x [..] w [..] -> [..]"
};

void cudnn_conv::finalize(context& ctx, const shape& output, const std::vector<shape>& inputs) {
    auto* g = dynamic_cast<gpu_context*>(&ctx);
    if (!g || !gpu_context::has_device()) return;  // compiled ahead: planned where it runs
    g->use_device(true);
    auto st = std::make_shared<cudnn_conv_state>();
    st->problem = "x " + inputs.at(0).to_string() + " w " + inputs.at(1).to_string() + " -> " + output.to_string() +
                  " group " + std::to_string(group) + (tf32 ? " tf32" : "");
    const std::string what = "gpu::cudnn_conv (" + st->problem + ")";
    try {
        const bool one_d = stride.size() == 1;
        auto add = [&](std::vector<std::int64_t> v, std::int64_t unit) {
            if (one_d) v.insert(v.begin(), unit);
            return v;
        };
        cudnnHandle_t handle = g->cudnn_handle();
        const auto types = cudnn_types_of(output.get_type());
        backend x = tensor(1, dims_of(inputs.at(0), one_d), types.data, "x of " + what);
        backend w = tensor(2, dims_of(inputs.at(1), one_d), types.data, "w of " + what);
        backend y = tensor(3, dims_of(output, one_d), types.data, "y of " + what);
        const std::int64_t spatial = static_cast<std::int64_t>(stride.size() + (one_d ? 1 : 0));
        backend conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution of " + what);
        conv.set1(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, static_cast<cudnnDataType_t>(types.compute), what);
        conv.set1(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, CUDNN_CROSS_CORRELATION, what);
        conv.set1(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, spatial, what);
        conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, add(dilation, 1), what);
        conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, add(stride, 1), what);
        conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, add(pad_begin, 0), what);
        conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, add(pad_end, 0), what);
        conv.finalize("convolution of " + what);

        backend op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, "forward op of " + what);
        op.set1(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, x.get(), what);
        op.set1(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, w.get(), what);
        op.set1(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, y.get(), what);
        op.set1(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, conv.get(), what);
        op.set1(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1.0f, what);
        op.set1(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 0.0f, what);
        op.finalize("forward op of " + what);

        backend graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph of " + what);
        graph.set1(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, op.get(), what);
        graph.set1(graph_handle, CUDNN_TYPE_HANDLE, handle, what);
        graph.finalize("operation graph of " + what);

        std::string rejected;
        for (auto mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
            backend heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristic of " + what);
            heur.set1(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, graph.get(), what);
            heur.set1(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode, what);
            if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) {
                rejected += " heuristic mode " + std::to_string(static_cast<int>(mode)) + " did not finalize;";
                continue;
            }
            std::int64_t available = 0;
            check_cudnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                 0, &available, nullptr),
                        "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS count) of " + what);
            std::vector<backend> cfgs;
            std::vector<cudnnBackendDescriptor_t> raw;
            for (std::int64_t i = 0; i < available; ++i) {
                cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config of " + what);
                raw.push_back(cfgs.back().get());
            }
            std::int64_t got = 0;
            if (available > 0)
                check_cudnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &got, raw.data()),
                            "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS) of " + what);
            for (std::int64_t i = 0; i < got; ++i) {
                const auto cfg = raw[static_cast<std::size_t>(i)];
                const auto info = engine_of(cfg, output.get_type(), tf32);
                const std::string engine = " engine " + std::to_string(info.index);
                if (!info.strict) {
                    rejected += engine + " notes" + info.notes + ";";
                    continue;
                }
                auto plan = std::make_unique<backend>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan of " + what);
                plan->set1(plan_handle, CUDNN_TYPE_HANDLE, handle, what);
                plan->set1(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, cfg, what);
                if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) {
                    rejected += engine + " no plan;";
                    continue;
                }
                std::int64_t n = 0, ws = 0;
                check_cudnn(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                     CUDNN_TYPE_INT64, 1, &n, &ws),
                            "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE) of " + what);
                if (ws < 0 || static_cast<std::size_t>(ws) > cudnn_workspace_bytes) {
                    rejected += engine + " workspace " + std::to_string(ws) + ";";
                    continue;
                }
                st->engine = info.index;
                st->workspace = static_cast<std::size_t>(ws);
                st->handle = handle;
                st->plan = std::move(plan);
                break;
            }
            if (st->plan) break;
        }
        if (!st->plan) st->host_reason = "no cuDNN plan its notes allow for " + what + ":" + rejected;
    } catch (const error& e) {
        // cuDNN refused the graph: the convolution still runs, on the host (counted).
        st->host_reason = e.message();
    }
    state = std::move(st);
}

namespace {
std::atomic<std::size_t> host_fallbacks{0};
}  // namespace

std::size_t cudnn_host_fallbacks() { return host_fallbacks.load(); }

std::string cudnn_conv::host_reason() const { return state ? state->host_reason : std::string(); }

std::string cudnn_conv::engine() const {
    if (!state || !state->plan) return {};
    return "engine " + std::to_string(state->engine) + ", workspace " + std::to_string(state->workspace) + " B";
}

argument cudnn_conv::compute(context& ctx, const shape& output, const std::vector<argument>& args) const {
    auto& g = gpu_context_of(ctx, "gpu::cudnn_conv");
    if (!state)
        throw_error(error_code::runtime, "gpu::cudnn_conv: not planned on a device (the program was finalized where "
                                         "there was no device; compile or load it on the machine that runs it)");
    auto what = [&] { return "gpu::cudnn_conv (" + state->problem + ")"; };
    if (args.size() != 4) throw_error(error_code::runtime, what() + ": expects 4 arguments");
    for (std::size_t i = 0; i < 4; ++i) {
        static const char* names[] = {"x", "w", "workspace", "output"};
        if (args[i].location() != memory_location::device)
            throw_error(error_code::runtime, what() + ": " + names[i] + " is host memory; gpu kernels take device memory");
        if (i != 2 && reinterpret_cast<std::uintptr_t>(args[i].data()) % 16 != 0)
            throw_error(error_code::runtime, what() + ": " + names[i] + " is not 16-byte aligned");
        if (i != 2 && !args[i].get_shape().standard())
            throw_error(error_code::runtime, what() + ": " + names[i] + " " + args[i].get_shape().to_string() +
                                                 " is not row-major");
    }
    const auto& out = args[3];
    if (!state->plan) {
        ++host_fallbacks;
        const argument x = download(args[0], g, "x of gpu::cudnn_conv (host run)");
        const argument w = download(args[1], g, "w of gpu::cudnn_conv (host run)");
        op::convolution c;
        c.padding = pad_begin;
        c.padding.insert(c.padding.end(), pad_end.begin(), pad_end.end());
        c.stride = stride;
        c.dilation = dilation;
        c.group = group;
        const argument result = c.compute(c.compute_shape({x.get_shape(), w.get_shape()}), {x, w});
        argument staging(out.get_shape());
        result.copy_to(staging);
        upload_into(staging, out, g, "the result of gpu::cudnn_conv (host run)");
        g.finish();
        return out.reshape(output);
    }
    if (args[2].get_shape().bytes() < state->workspace)
        throw_error(error_code::runtime, what() + ": the plan needs " + std::to_string(state->workspace) +
                                             " workspace bytes, the planned buffer has " +
                                             std::to_string(args[2].get_shape().bytes()));
    const std::vector<std::int64_t> uids = {1, 2, 3};
    // cuDNN takes the pointers as void* (x and w are only read).
    auto device_ptr = [](const argument& a) { return static_cast<void*>(const_cast<char*>(reinterpret_cast<const char*>(a.data()))); };
    const std::vector<void*> pointers = {device_ptr(args[0]), device_ptr(args[1]), device_ptr(out)};
    void* workspace = device_ptr(args[2]);
    std::lock_guard<std::mutex> lock(g.cudnn_mutex());  // one handle per context: one run at a time on it
    backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack of " + what());
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, what());
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers, what());
    pack.set1(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace, what());
    pack.finalize("variant pack of " + what());
    check_cudnn(cudnnBackendExecute(state->handle, state->plan->get(), pack.get()), "cudnnBackendExecute for " + what());
    return out.reshape(output);
}

// ---------------------------------------------------------------------------------------
// The lowering's side.

bool cudnn_conv_takes(instruction_ref ins) {
    const auto* c = ins->get_operator().any_cast<op::convolution>();
    if (!c || ins->inputs().size() != 2) return false;
    const auto& x = ins->inputs()[0]->get_shape();
    const auto& w = ins->inputs()[1]->get_shape();
    const auto& y = ins->get_shape();
    for (const shape* s : {&x, &w, &y})
        if (!s->is_tensor() || s->dynamic() || !cudnn_element_type(s->get_type()) || s->get_type() != y.get_type() ||
            s->elements() == 0)
            return false;
    if (x.ndim() < 3 || x.ndim() > 5 || !x.standard() || !w.standard()) return false;
    try {
        (void)make_cudnn_conv(ins);
    } catch (const error&) {
        return false;
    }
    return true;
}

cudnn_conv make_cudnn_conv(instruction_ref ins) {
    const auto* conv = ins->get_operator().any_cast<op::convolution>();
    if (!conv) throw_error(error_code::invalid_argument, "gpu::cudnn_conv: " + ins->name() + " is not a convolution");
    const auto& c = *conv;
    const auto& x = ins->inputs().at(0)->get_shape();
    const auto& w = ins->inputs().at(1)->get_shape();
    const auto g = c.conv_geom("convolution", x, w);
    const std::size_t r = g.rank();
    cudnn_conv k;
    k.stride = g.stride;
    k.dilation = g.dilation;
    k.group = g.group;
    k.pad_begin = g.pad_begin;
    for (std::size_t d = 0; d < r; ++d) {
        // What ends the last window: extra end padding that no window reaches (ONNX allows
        // it) is dropped, as cuDNN derives the output size from the paddings.
        const std::int64_t needed =
            (g.out[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d] + 1 - g.in[d] - g.pad_begin[d];
        k.pad_end.push_back(std::max<std::int64_t>(needed, 0));
        if (g.pad_begin[d] < 0) throw_error(error_code::unsupported, "gpu::cudnn_conv: negative padding");
    }
    return k;
}

KILN_REGISTER_OP(cudnn_conv)

}  // namespace kiln::gpu
