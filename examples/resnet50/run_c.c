/* The guide's workflow in plain C11, through kiln.h alone: parse the exported ResNet-50 with the
 * batch fixed to 1, compile for a target, run it on an input tensor file, write the output, save
 * the compiled program, load it back and check the loaded one answers the same.
 *
 *     run_c resnet50.onnx input.pb output.pb resnet50.kiln [target]
 *
 * input.pb / output.pb are ONNX TensorProto files (kiln.write_tensor_proto, the backend-test
 * layout). Exit 0 on success; a failure prints the function and Kiln's message. */
#include <kiln/kiln.h>

#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        if ((call) != KILN_STATUS_SUCCESS) {                                          \
            fprintf(stderr, "%s failed: %s\n", #call, kiln_last_error_message());     \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

/* Runs `program` on `input` named `name`; the caller destroys *output. */
static int run_once(kiln_program program, const char* name, kiln_argument input, kiln_argument* output) {
    kiln_params params;
    kiln_arguments outputs;
    CHECK(kiln_params_create(&params));
    CHECK(kiln_params_add(params, name, input));
    CHECK(kiln_program_run(program, params, &outputs));
    CHECK(kiln_arguments_get(outputs, 0, output));
    kiln_arguments_destroy(outputs);
    kiln_params_destroy(params);
    return 0;
}

int main(int argc, char** argv) {
    const char* target_name = argc > 5 ? argv[5] : "cpu";
    size_t dims[] = {1, 3, 224, 224}, bytes = 0;
    const char* input_name;
    kiln_onnx_options options;
    kiln_program program, loaded;
    kiln_target target;
    kiln_compile_options compile;
    kiln_argument input, output, again;
    kiln_shape out_shape;
    void *a, *b;
    if (argc < 5) {
        fprintf(stderr, "usage: run_c resnet50.onnx input.pb output.pb resnet50.kiln [target]\n");
        return 2;
    }
    CHECK(kiln_onnx_options_create(&options));
    CHECK(kiln_onnx_options_set_input_dims(options, "input", dims, 4));
    CHECK(kiln_parse_onnx(argv[1], options, &program));
    CHECK(kiln_target_get(target_name, &target));
    CHECK(kiln_compile_options_create(&compile));
    CHECK(kiln_compile_options_set_offload_copy(compile, 1));
    CHECK(kiln_program_compile(program, target, compile));
    CHECK(kiln_program_input_name(program, 0, &input_name));

    CHECK(kiln_argument_read_tensor_proto(argv[2], &input));
    if (run_once(program, input_name, input, &output)) return 1;
    CHECK(kiln_argument_write_tensor_proto(output, "output", argv[3]));

    /* Compile once, load many: the saved program answers exactly as the one compiled here. */
    CHECK(kiln_save(program, argv[4]));
    CHECK(kiln_load(argv[4], NULL, &loaded));
    if (run_once(loaded, input_name, input, &again)) return 1;
    CHECK(kiln_argument_shape(output, &out_shape));
    CHECK(kiln_shape_bytes(out_shape, &bytes));
    CHECK(kiln_argument_data(output, &a));
    CHECK(kiln_argument_data(again, &b));
    if (memcmp(a, b, bytes) != 0) {
        fprintf(stderr, "the loaded program's output differs from the compiled one's\n");
        return 1;
    }
    printf("ok: %zu output bytes, saved and loaded program agree\n", bytes);

    kiln_shape_destroy(out_shape);
    kiln_argument_destroy(again), kiln_argument_destroy(output), kiln_argument_destroy(input);
    kiln_program_destroy(loaded), kiln_program_destroy(program);
    kiln_compile_options_destroy(compile);
    kiln_target_destroy(target);
    kiln_onnx_options_destroy(options);
    return 0;
}
