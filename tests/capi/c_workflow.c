/* The MIGraphX-style workflow in plain C11, including nothing of Kiln but kiln.h: parse
 * a shared model, read its inputs' shapes, compile for the cpu target, run each test
 * data set and compare with the stored outputs, run into a caller's buffer, save to a
 * .kiln and load it back. c_workflow_test.cpp runs it; it reports the first failure. */
#include <kiln/kiln.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_workflow.h"

/* On failure: write where and why into the report and jump to cleanup. */
#define CHECK(call)                                                                                      \
    do {                                                                                                 \
        kiln_status s_ = (call);                                                                         \
        if (s_ != KILN_STATUS_SUCCESS) {                                                                 \
            snprintf(report, report_size, "line %d: %s gave %s: %s", __LINE__, #call, kiln_status_name(s_), \
                     kiln_last_error_message());                                                         \
            goto cleanup;                                                                                \
        }                                                                                                \
    } while (0)
#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            int n_ = snprintf(report, report_size, "line %d: ", __LINE__); \
            snprintf(report + n_, report_size - (size_t)n_, __VA_ARGS__);  \
            goto cleanup;                                                  \
        }                                                                  \
    } while (0)

/* The first element outside |a - b| <= atol + rtol * |b| (the models' README tolerance),
 * or -1 when all agree. Compares float32 tensors only. */
static long first_mismatch(kiln_argument actual, kiln_argument expected, size_t* count) {
    kiln_shape sa = NULL, se = NULL;
    float *a = NULL, *e = NULL;
    size_t na = 0, ne = 0, bytes = 0;
    long bad = -2;
    if (kiln_argument_shape(actual, &sa) || kiln_argument_shape(expected, &se)) goto done;
    if (kiln_shape_elements(sa, &na) || kiln_shape_elements(se, &ne) || na != ne) goto done;
    bytes = na * sizeof(float);
    a = malloc(bytes + 1), e = malloc(bytes + 1);
    if (!a || !e || kiln_argument_copy_to(actual, a, bytes) || kiln_argument_copy_to(expected, e, bytes)) goto done;
    bad = -1;
    for (size_t i = 0; i < na && bad == -1; ++i)
        if (!(fabsf(a[i] - e[i]) <= 1e-4f + 1e-3f * fabsf(e[i]))) bad = (long)i;
    *count = na;
done:
    free(a), free(e);
    if (sa) kiln_shape_destroy(sa);
    if (se) kiln_shape_destroy(se);
    return bad;
}

/* Runs test_data_set_<set> of the model in `dir` through `program` (reading input_N.pb
 * for each input N) and compares every output with output_N.pb. */
static int run_data_set(kiln_program program, const char* dir, int set, char* report, size_t report_size) {
    char path[4096];
    int ok = 0;
    size_t inputs = 0, outputs = 0, count = 0;
    kiln_params params = NULL;
    kiln_arguments results = NULL;
    kiln_argument input = NULL, actual = NULL, expected = NULL;

    CHECK(kiln_params_create(&params));
    CHECK(kiln_program_input_count(program, &inputs));
    for (size_t i = 0; i < inputs; ++i) {
        const char* name = NULL;
        CHECK(kiln_program_input_name(program, i, &name));
        snprintf(path, sizeof path, "%s/test_data_set_%d/input_%zu.pb", dir, set, i);
        CHECK(kiln_argument_read_tensor_proto(path, &input));
        CHECK(kiln_params_add(params, name, input));
        kiln_argument_destroy(input), input = NULL; /* the params share its memory */
    }
    CHECK(kiln_program_run(program, params, &results));
    CHECK(kiln_program_output_count(program, &outputs));
    CHECK(kiln_arguments_size(results, &count));
    EXPECT(count == outputs, "%zu results for %zu outputs", count, outputs);
    for (size_t i = 0; i < outputs; ++i) {
        snprintf(path, sizeof path, "%s/test_data_set_%d/output_%zu.pb", dir, set, i);
        CHECK(kiln_argument_read_tensor_proto(path, &expected));
        CHECK(kiln_arguments_get(results, i, &actual));
        size_t n = 0;
        long bad = first_mismatch(actual, expected, &n);
        EXPECT(bad == -1, "%s: output %zu differs from the stored one at element %ld", path, i, bad);
        kiln_argument_destroy(actual), actual = NULL;
        kiln_argument_destroy(expected), expected = NULL;
    }
    ok = 1;
cleanup:
    if (input) kiln_argument_destroy(input);
    if (actual) kiln_argument_destroy(actual);
    if (expected) kiln_argument_destroy(expected);
    if (results) kiln_arguments_destroy(results);
    if (params) kiln_params_destroy(params);
    return ok;
}

/* Runs data set 0 into a buffer the caller allocated (one-output models). */
static int run_into_buffer(kiln_program program, const char* dir, char* report, size_t report_size) {
    char path[4096];
    int ok = 0;
    const char* name = NULL;
    size_t bytes = 0, n = 0;
    void* buffer = NULL;
    kiln_params params = NULL;
    kiln_argument input = NULL, expected = NULL, wrapped = NULL;
    kiln_shape shape = NULL;

    CHECK(kiln_params_create(&params));
    CHECK(kiln_program_input_name(program, 0, &name));
    snprintf(path, sizeof path, "%s/test_data_set_0/input_0.pb", dir);
    CHECK(kiln_argument_read_tensor_proto(path, &input));
    CHECK(kiln_params_add(params, name, input));
    snprintf(path, sizeof path, "%s/test_data_set_0/output_0.pb", dir);
    CHECK(kiln_argument_read_tensor_proto(path, &expected));
    CHECK(kiln_argument_shape(expected, &shape));
    CHECK(kiln_shape_bytes(shape, &bytes));
    buffer = calloc(1, bytes);
    EXPECT(buffer != NULL, "no memory");
    CHECK(kiln_argument_wrap(shape, buffer, bytes, &wrapped));
    CHECK(kiln_program_run_into(program, params, &wrapped, 1));
    long bad = first_mismatch(wrapped, expected, &n);
    EXPECT(bad == -1, "run_into: the caller's buffer differs from the stored output at element %ld", bad);
    ok = 1;
cleanup:
    if (wrapped) kiln_argument_destroy(wrapped);
    free(buffer);
    if (shape) kiln_shape_destroy(shape);
    if (input) kiln_argument_destroy(input);
    if (expected) kiln_argument_destroy(expected);
    if (params) kiln_params_destroy(params);
    return ok;
}

int kiln_c_workflow(const char* model_dir, int data_sets, const char* kiln_path, char* report, size_t report_size) {
    char path[4096];
    int ok = 0, dynamic = 0, compiled = 0;
    size_t inputs = 0, ndim = 0, min = 0, max = 0, arena = 0, params = 0, literals = 0, outs = 0;
    const char* name = NULL;
    const size_t* lens = NULL;
    kiln_program program = NULL, loaded = NULL;
    kiln_target cpu = NULL;
    kiln_compile_options options = NULL;
    kiln_shape shape = NULL;
    report[0] = '\0';

    snprintf(path, sizeof path, "%s/model.onnx", model_dir);
    CHECK(kiln_parse_onnx(path, NULL, &program));
    /* The shared models keep their batch dynamic: a range, the default shape batch 1. */
    CHECK(kiln_program_input_count(program, &inputs));
    EXPECT(inputs >= 1, "no inputs");
    CHECK(kiln_program_input_name(program, 0, &name));
    CHECK(kiln_program_input_shape(program, name, &shape));
    CHECK(kiln_shape_is_dynamic(shape, &dynamic));
    CHECK(kiln_shape_lens(shape, &lens, &ndim));
    CHECK(kiln_shape_dyn_dim(shape, 0, &min, &max));
    EXPECT(dynamic && ndim >= 1 && lens[0] == 1 && min == 0 && max == 4096,
           "input '%s': expected a dynamic batch 0..4096 with default 1, got dynamic=%d, lens[0]=%zu, %zu..%zu", name,
           dynamic, ndim ? lens[0] : 0, min, max);

    CHECK(kiln_target_get("cpu", &cpu));
    CHECK(kiln_compile_options_create(&options));
    CHECK(kiln_compile_options_set_offload_copy(options, 1));
    CHECK(kiln_program_compile(program, cpu, options));
    CHECK(kiln_program_is_compiled(program, &compiled));
    EXPECT(compiled, "not compiled after kiln_program_compile");
    for (int set = 0; set < data_sets; ++set)
        if (!run_data_set(program, model_dir, set, report, report_size)) goto cleanup;
    if (!run_into_buffer(program, model_dir, report, report_size)) goto cleanup;
    CHECK(kiln_program_memory_usage(program, &arena, &params, &literals, &outs));
    EXPECT(literals > 0, "memory usage: no weights counted");

    CHECK(kiln_save(program, kiln_path));
    CHECK(kiln_load(kiln_path, NULL, &loaded));
    for (int set = 0; set < data_sets; ++set)
        if (!run_data_set(loaded, model_dir, set, report, report_size)) goto cleanup;
    ok = 1;
cleanup:
    if (shape) kiln_shape_destroy(shape);
    if (options) kiln_compile_options_destroy(options);
    if (cpu) kiln_target_destroy(cpu);
    if (loaded) kiln_program_destroy(loaded);
    if (program) kiln_program_destroy(program);
    return ok;
}
