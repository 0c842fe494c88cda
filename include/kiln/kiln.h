/* Kiln's stable C API (C11): parse an ONNX model, compile it for a target, run it,
 * save and load it. Applications that should survive library upgrades use this header
 * (or kiln.hpp, its C++ wrapper) and link libkiln_c; the C++ headers next to it are for
 * code that extends Kiln (ops, passes, targets) and change between versions.
 *
 * Conventions (every function):
 * - returns a kiln_status: KILN_STATUS_SUCCESS, or one of the stable error codes of
 *   docs/errors.md; then kiln_last_error_message() says what went wrong (per thread).
 *   Only kiln_last_error_message() and kiln_status_name() return something else.
 * - never lets an exception, abort or exit through, whatever the input.
 * - a NULL handle, one of another kind, one already destroyed (found by a tag the
 *   destroy clears, so as long as its memory was not reused), and a NULL pointer where
 *   one is required give KILN_STATUS_INVALID_ARGUMENT; outputs are left untouched on
 *   failure.
 * - every handle a function hands out is the caller's and is freed with its
 *   kiln_<kind>_destroy; handles share the data they were made from (an argument taken
 *   from a run's outputs stays valid after the outputs are destroyed).
 * - strings and arrays returned as `const char*` / `const size_t*` belong to the handle
 *   they came from and stay valid until it is destroyed (kiln_version_string,
 *   kiln_target_name_at: for the whole process).
 * - one handle may be used from several threads for kiln_program_run and the getters;
 *   functions that change a handle (compile, set_*, add) need the caller to serialize.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C++ sees the enums with int as their fixed type, so that any number a C caller passes
 * is a value of the type there (without it, 999 as a kiln_type is undefined behaviour
 * in the library's C++); the layout is int either way. */
#ifdef __cplusplus
#define KILN_ENUM_INT : int
#else
#define KILN_ENUM_INT
#endif

/* The numbers are kiln::error_code's (include/kiln/errors.hpp) and never change. */
typedef enum kiln_status KILN_ENUM_INT {
    KILN_STATUS_SUCCESS = 0,
    KILN_STATUS_PARSE = 1,            /* the model or file cannot be read (corrupt, truncated) */
    KILN_STATUS_UNSUPPORTED = 2,      /* a valid model uses something Kiln does not implement */
    KILN_STATUS_SHAPE = 3,            /* shapes disagree (an op's inputs, a caller's input) */
    KILN_STATUS_TYPE = 4,             /* element types disagree */
    KILN_STATUS_IO = 5,               /* a file cannot be opened, read or written */
    KILN_STATUS_RUNTIME = 6,          /* failure while running (kernel, device, bad state) */
    KILN_STATUS_OUT_OF_MEMORY = 7,    /* an allocation failed or passed a limit */
    KILN_STATUS_INVALID_ARGUMENT = 8  /* API misuse: null handle, unknown name, bad value */
} kiln_status;

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum kiln_type KILN_ENUM_INT {
    KILN_TYPE_FLOAT32 = 1,
    KILN_TYPE_UINT8 = 2,
    KILN_TYPE_INT8 = 3,
    KILN_TYPE_UINT16 = 4,
    KILN_TYPE_INT16 = 5,
    KILN_TYPE_INT32 = 6,
    KILN_TYPE_INT64 = 7,
    KILN_TYPE_STRING = 8,
    KILN_TYPE_BOOL = 9,
    KILN_TYPE_FLOAT16 = 10,
    KILN_TYPE_FLOAT64 = 11,
    KILN_TYPE_UINT32 = 12,
    KILN_TYPE_UINT64 = 13,
    KILN_TYPE_BFLOAT16 = 16,
    KILN_TYPE_FLOAT8E4M3FN = 17,
    KILN_TYPE_FLOAT8E4M3FNUZ = 18,
    KILN_TYPE_FLOAT8E5M2 = 19,
    KILN_TYPE_FLOAT8E5M2FNUZ = 20,
    KILN_TYPE_UINT4 = 21,
    KILN_TYPE_INT4 = 22,
    KILN_TYPE_FLOAT4E2M1 = 23,
    KILN_TYPE_FLOAT8E8M0 = 24,
    KILN_TYPE_UINT2 = 25,
    KILN_TYPE_INT2 = 26
} kiln_type;

typedef enum kiln_shape_kind KILN_ENUM_INT {
    KILN_SHAPE_TENSOR = 0,
    KILN_SHAPE_TUPLE = 1,
    KILN_SHAPE_SEQUENCE = 2,
    KILN_SHAPE_OPTIONAL = 3
} kiln_shape_kind;

/* Opaque handles. */
typedef struct kiln_onnx_options_t* kiln_onnx_options;
typedef struct kiln_compile_options_t* kiln_compile_options;
typedef struct kiln_file_options_t* kiln_file_options;
typedef struct kiln_target_t* kiln_target;
typedef struct kiln_shape_t* kiln_shape;
typedef struct kiln_argument_t* kiln_argument;
typedef struct kiln_arguments_t* kiln_arguments; /* a run's outputs, in order */
typedef struct kiln_params_t* kiln_params;       /* input name -> argument */
typedef struct kiln_program_t* kiln_program;
/* A module and an instruction of a program being built by hand: both belong to the program
 * (no destroy; valid until the program is destroyed). */
typedef struct kiln_module_t* kiln_module;
typedef struct kiln_instruction_t* kiln_instruction;

/* ---- errors and version ---- */
/* The message of the last call that failed on this thread ("" if none), e.g.
 * "shape error: input 'x': expected float32[2, 3], got float32[3, 2] (in kiln_program_run)"
 * (docs/errors.md: the codes and the messages' shape). Valid until the next failing call
 * on this thread; successful calls leave it alone. */
const char* kiln_last_error_message(void);
/* "success", "parse error", ... ("unknown status" for other numbers). */
const char* kiln_status_name(kiln_status status);
kiln_status kiln_version(int* major, int* minor, int* patch);
kiln_status kiln_version_string(const char** version);

/* ---- ONNX options (kiln::onnx_options; the defaults are its defaults) ---- */
kiln_status kiln_onnx_options_create(kiln_onnx_options* out);
kiln_status kiln_onnx_options_destroy(kiln_onnx_options options);
/* Fixes every symbolic or unknown input dim to `value` (unset: they stay dynamic). */
kiln_status kiln_onnx_options_set_default_dim_value(kiln_onnx_options options, size_t value);
/* The range of symbolic/unknown dims when no default_dim_value is set (default 0..4096, optimal 1). */
kiln_status kiln_onnx_options_set_default_dyn_dim_value(kiln_onnx_options options, size_t min, size_t max,
                                                        const size_t* optimals, size_t optimal_count);
/* Static dims of one input, overriding the model's. */
kiln_status kiln_onnx_options_set_input_dims(kiln_onnx_options options, const char* input, const size_t* dims,
                                             size_t ndim);
/* Ranges of one input's dims (min[i] == max[i]: a fixed dim); then optionally each dim's optimals. */
kiln_status kiln_onnx_options_set_dyn_input_dims(kiln_onnx_options options, const char* input, const size_t* mins,
                                                 const size_t* maxs, size_t ndim);
kiln_status kiln_onnx_options_set_dyn_input_dim_optimals(kiln_onnx_options options, const char* input, size_t dim,
                                                         const size_t* optimals, size_t count);
/* Names a dim of those ranges: "batch", or a sum of names such as "past + sequence". Dims with
 * the same name are the same size in every run (inputs that share a dim, a KV cache's length). */
kiln_status kiln_onnx_options_set_dyn_input_dim_symbol(kiln_onnx_options options, const char* input, size_t dim,
                                                       const char* symbol);
kiln_status kiln_onnx_options_set_skip_unknown_operators(kiln_onnx_options options, int skip);
kiln_status kiln_onnx_options_set_max_loop_iterations(kiln_onnx_options options, size_t iterations);
kiln_status kiln_onnx_options_set_limit_max_iterations(kiln_onnx_options options, int limit);
kiln_status kiln_onnx_options_set_external_data_path(kiln_onnx_options options, const char* path);

/* ---- compile options (kiln::compile_options) ---- */
kiln_status kiln_compile_options_create(kiln_compile_options* out);
kiln_status kiln_compile_options_destroy(kiln_compile_options options);
kiln_status kiln_compile_options_set_offload_copy(kiln_compile_options options, int offload_copy);
kiln_status kiln_compile_options_set_device_id(kiln_compile_options options, int device_id);
kiln_status kiln_compile_options_set_fast_math(kiln_compile_options options, int fast_math);
kiln_status kiln_compile_options_set_exhaustive_tune(kiln_compile_options options, int exhaustive_tune);
kiln_status kiln_compile_options_set_threads(kiln_compile_options options, size_t threads);
kiln_status kiln_compile_options_set_max_specializations(kiln_compile_options options, size_t count);
kiln_status kiln_compile_options_set_specialize_after(kiln_compile_options options, size_t calls);
/* The gpu target: float32 products and convolutions may use TF32 tensor cores (default 0: strict fp32). */
kiln_status kiln_compile_options_set_tf32(kiln_compile_options options, int tf32);
/* The gpu target: the CUDA architecture to compile kernels for ("sm_90", "sm_100"), e.g. ahead of
   time on a machine without the device; "" for the default (the build's first KILN_CUDA_ARCHS). A
   name that is no architecture is refused when the program compiles for the gpu. */
kiln_status kiln_compile_options_set_gpu_arch(kiln_compile_options options, const char* arch);
/* Sizes of the named dim compiled ahead (a server's batch 1, 2, 4, 8). */
kiln_status kiln_compile_options_add_dynamic_buckets(kiln_compile_options options, const char* dim,
                                                     const size_t* sizes, size_t count);

/* ---- file options (loading a .kiln) ---- */
kiln_status kiln_file_options_create(kiln_file_options* out);
kiln_status kiln_file_options_destroy(kiln_file_options options);
/* The device a compiled program is restored on (default: the one it was compiled for). */
kiln_status kiln_file_options_set_device_id(kiln_file_options options, int device_id);

/* ---- targets ---- */
/* The targets of this build, available on this machine or not. */
kiln_status kiln_target_count(size_t* count);
kiln_status kiln_target_name_at(size_t index, const char** name);
kiln_status kiln_target_get(const char* name, kiln_target* out);
kiln_status kiln_target_destroy(kiln_target target);
kiln_status kiln_target_name(kiln_target target, const char** name);
/* *available = 1 when the target can run here; else 0 and *reason says why. */
kiln_status kiln_target_available(kiln_target target, int* available, const char** reason);

/* ---- shapes ---- */
/* A standard (row-major) tensor shape when strides is NULL. */
kiln_status kiln_shape_create(kiln_type type, const size_t* lens, size_t ndim, const size_t* strides,
                              kiln_shape* out);
kiln_status kiln_shape_destroy(kiln_shape shape);
kiln_status kiln_shape_kind_of(kiln_shape shape, kiln_shape_kind* kind);
kiln_status kiln_shape_type(kiln_shape shape, kiln_type* type);
/* Lens and strides (in elements) have *ndim entries. A dynamic shape gives its default
 * lens (each dim's smallest optimal, else its min) and their standard strides. */
kiln_status kiln_shape_lens(kiln_shape shape, const size_t** lens, size_t* ndim);
kiln_status kiln_shape_strides(kiln_shape shape, const size_t** strides, size_t* ndim);
kiln_status kiln_shape_is_dynamic(kiln_shape shape, int* dynamic);
/* One dim's range (max SIZE_MAX: unbounded); a fixed dim has min == max. */
kiln_status kiln_shape_dyn_dim(kiln_shape shape, size_t dim, size_t* min, size_t* max);
kiln_status kiln_shape_dyn_dim_optimals(kiln_shape shape, size_t dim, const size_t** optimals, size_t* count);
/* The dim's name ("batch", "past + sequence"; "" when anonymous). */
kiln_status kiln_shape_dyn_dim_symbol(kiln_shape shape, size_t dim, const char** symbol);
kiln_status kiln_shape_elements(kiln_shape shape, size_t* elements);
kiln_status kiln_shape_bytes(kiln_shape shape, size_t* bytes);
kiln_status kiln_shape_to_string(kiln_shape shape, const char** text);

/* ---- arguments (a shape and its memory) ---- */
/* Copies `size` bytes (the shape's kiln_shape_bytes exactly) from `data`; NULL data: zeros. */
kiln_status kiln_argument_create(kiln_shape shape, const void* data, size_t size, kiln_argument* out);
/* Borrows the caller's memory (no copy); it must stay alive while the argument is used. */
kiln_status kiln_argument_wrap(kiln_shape shape, void* data, size_t size, kiln_argument* out);
kiln_status kiln_argument_destroy(kiln_argument argument);
kiln_status kiln_argument_shape(kiln_argument argument, kiln_shape* out);
/* The tensor's memory, laid out as its shape's strides say. */
kiln_status kiln_argument_data(kiln_argument argument, void** data);
/* Copies the tensor in row-major order into `dest`, whose `size` must equal its elements' bytes. */
kiln_status kiln_argument_copy_to(kiln_argument argument, void* dest, size_t size);
/* ONNX TensorProto files (.pb), the layout of the ONNX test data. Writing a sequence or an
 * optional argument writes a SequenceProto / OptionalProto, as the backend tests store them. */
kiln_status kiln_argument_read_tensor_proto(const char* path, kiln_argument* out);
kiln_status kiln_argument_write_tensor_proto(kiln_argument argument, const char* name, const char* path);
/* The elements of a tuple, a sequence or an optional (0 or 1) argument, e.g. a SplitToSequence
 * output (its shape's kind says which); each element is the caller's to destroy and shares the
 * memory. A tensor argument is refused. */
kiln_status kiln_argument_element_count(kiln_argument argument, size_t* count);
kiln_status kiln_argument_element(kiln_argument argument, size_t index, kiln_argument* out);

kiln_status kiln_arguments_destroy(kiln_arguments arguments);
kiln_status kiln_arguments_size(kiln_arguments arguments, size_t* size);
kiln_status kiln_arguments_get(kiln_arguments arguments, size_t index, kiln_argument* out);

/* ---- parameters of a run ---- */
kiln_status kiln_params_create(kiln_params* out);
kiln_status kiln_params_destroy(kiln_params params);
/* Adds or replaces `name` (the params share the argument's memory). */
kiln_status kiln_params_add(kiln_params params, const char* name, kiln_argument argument);

/* ---- programs ---- */
/* options may be NULL (defaults). */
kiln_status kiln_parse_onnx(const char* path, kiln_onnx_options options, kiln_program* out);
kiln_status kiln_parse_onnx_buffer(const void* data, size_t size, kiln_onnx_options options, kiln_program* out);
kiln_status kiln_program_destroy(kiln_program program);
kiln_status kiln_program_input_count(kiln_program program, size_t* count);
kiln_status kiln_program_input_name(kiln_program program, size_t index, const char** name);
/* The declared shape of an input (dynamic dims as ranges). */
kiln_status kiln_program_input_shape(kiln_program program, const char* name, kiln_shape* out);
kiln_status kiln_program_output_count(kiln_program program, size_t* count);
kiln_status kiln_program_output_name(kiln_program program, size_t index, const char** name);
kiln_status kiln_program_output_shape(kiln_program program, size_t index, kiln_shape* out);
/* options may be NULL (defaults). */
kiln_status kiln_program_compile(kiln_program program, kiln_target target, kiln_compile_options options);
kiln_status kiln_program_is_compiled(kiln_program program, int* compiled);
/* Before compile: the ops named in ops[0..op_count) compute in float16 (bfloat16); inputs
 * and outputs stay float32. ops NULL (or op_count 0) means {"all"} (docs/quantization.md). */
kiln_status kiln_quantize_fp16(kiln_program program, const char* const* ops, size_t op_count);
kiln_status kiln_quantize_bf16(kiln_program program, const char* const* ops, size_t op_count);
/* Before compile: int8 with calibration (docs/quantization.md). The float32 program runs,
 * compiled for `target`, on each of calibration[0..calibration_count) (input sets, at least
 * one); the ops named in ops[0..op_count) (NULL or 0: "convolution", "dot") then read
 * quantized activations (per tensor) and int8 weights (per output channel). method NULL means
 * "minmax" (else "percentile" or "entropy"); percentile <= 0 means 99.99; dump_scales, when
 * not NULL, is a file the scales are written to (JSON). Inputs and outputs stay float32. */
kiln_status kiln_quantize_int8(kiln_program program, kiln_target target, const kiln_params* calibration,
                               size_t calibration_count, const char* const* ops, size_t op_count, const char* method,
                               double percentile, const char* dump_scales);
/* Before compile: float8 e4m3fn activations and weights with per-tensor scales, calibrated as
 * kiln_quantize_int8 (same arguments; docs/quantization.md). */
kiln_status kiln_quantize_fp8(kiln_program program, kiln_target target, const kiln_params* calibration,
                              size_t calibration_count, const char* const* ops, size_t op_count, const char* method,
                              double percentile, const char* dump_scales);
/* Before compile: int4 weights (symmetric, one float32 scale per block_size rows of K; 0 means
 * 32) for every matmul/gemm with constant 2-D weights; activations stay float32. */
kiln_status kiln_quantize_int4_weights(kiln_program program, size_t block_size);
/* Runs a compiled program; every input by name. The outputs' memory is Kiln's. */
kiln_status kiln_program_run(kiln_program program, kiln_params params, kiln_arguments* outputs);
/* Runs and writes output i into outputs[i] (e.g. kiln_argument_wrap of the caller's
 * buffer), whose type and lens must be the run's; count must be the output count. Where the
 * compiled program's output is a plain buffer and outputs[i] is 64-byte aligned and row-major,
 * the program computes it there directly (no copy); other outputs are copied there after the
 * run. The buffers must not overlap the inputs; they are checked before the run. */
kiln_status kiln_program_run_into(kiln_program program, kiln_params params, const kiln_argument* outputs,
                                  size_t count);
/* Called once when an asynchronous run ends, on a thread of Kiln's: with the outputs
 * (the callback's to destroy) and KILN_STATUS_SUCCESS, or with NULL and the failure's
 * status, whose message kiln_last_error_message() gives inside the callback. */
typedef void (*kiln_run_callback)(void* user_data, kiln_status status, kiln_arguments outputs);
/* Starts a run on a new thread and returns at once; `callback` gets its result. The run
 * holds the program and the inputs' memory, so the caller may destroy both handles at
 * once (borrowed memory, kiln_argument_wrap, must stay alive until the callback). A
 * failure to start is this call's status, and the callback is then never called. The
 * callback must not throw (C++) and the process must not exit before it has run. */
kiln_status kiln_program_run_async(kiln_program program, kiln_params params, kiln_run_callback callback,
                                   void* user_data);
/* Bytes of the compiled program (a dynamic one: of the shapes run last). */
kiln_status kiln_program_memory_usage(kiln_program program, size_t* arena_bytes, size_t* parameter_bytes,
                                      size_t* literal_bytes, size_t* output_bytes);
/* The program's IR as text (valid until the next call of this on the handle). */
kiln_status kiln_program_to_string(kiln_program program, const char** text);

/* ---- Building a program by hand (as MIGraphX's API does) ----
 * kiln_program_create gives an empty program; its main module takes parameters, literals,
 * instructions (an op by its IR name, as `kiln read` prints it, with attributes as a JSON
 * object, e.g. "{\"padding\": [1, 1, 1, 1]}"; NULL or "" for none) and a return; then
 * compile and run it as a parsed one. Each instruction's shape is inferred when it is added:
 * a wrong one, an unknown op or attribute is refused there, naming it. Adding to a compiled
 * program is refused. Name pointers taken before an add may dangle after it. */
kiln_status kiln_program_create(kiln_program* out);
kiln_status kiln_program_get_main_module(kiln_program program, kiln_module* out);
kiln_status kiln_module_add_parameter(kiln_module module, const char* name, kiln_shape shape, kiln_instruction* out);
/* Copies the argument's values into the program. */
kiln_status kiln_module_add_literal(kiln_module module, kiln_argument value, kiln_instruction* out);
kiln_status kiln_module_add_instruction(kiln_module module, const char* op_name, const char* attributes_json,
                                        const kiln_instruction* inputs, size_t input_count, kiln_instruction* out);
kiln_status kiln_module_add_return(kiln_module module, const kiln_instruction* inputs, size_t input_count);
/* The module's IR as text (valid until the next call of this on the module). */
kiln_status kiln_module_to_string(kiln_module module, const char** text);
/* The instruction's result shape (the caller's to destroy). */
kiln_status kiln_instruction_shape(kiln_instruction instruction, kiln_shape* out);

/* ---- .kiln files ---- */
kiln_status kiln_save(kiln_program program, const char* path);
/* options may be NULL (defaults). */
kiln_status kiln_load(const char* path, kiln_file_options options, kiln_program* out);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
