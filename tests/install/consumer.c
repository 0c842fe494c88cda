/* Built out of tree against an installed Kiln through pkg-config (test_install.py):
 * z = relu(x + y) of tests/data/models/add_relu.onnx on the cpu target, printed. */
#include <kiln/kiln.h>

#include <stdio.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        if ((call) != KILN_STATUS_SUCCESS) {                                                 \
            fprintf(stderr, "%s failed: %s\n", #call, kiln_last_error_message());            \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main(int argc, char** argv) {
    float x[6] = {1, -2, 3, -4, 5, -6}, y[6] = {1, 1, 1, 1, 1, 1}, z[6];
    size_t lens[] = {2, 3};
    kiln_program program;
    kiln_target cpu;
    kiln_shape shape;
    kiln_argument ax, ay, az;
    kiln_params params;
    if (argc != 2) return 2;
    CHECK(kiln_parse_onnx(argv[1], NULL, &program));
    CHECK(kiln_target_get("cpu", &cpu));
    CHECK(kiln_program_compile(program, cpu, NULL));
    CHECK(kiln_shape_create(KILN_TYPE_FLOAT32, lens, 2, NULL, &shape));
    CHECK(kiln_argument_wrap(shape, x, sizeof x, &ax));
    CHECK(kiln_argument_wrap(shape, y, sizeof y, &ay));
    CHECK(kiln_argument_wrap(shape, z, sizeof z, &az));
    CHECK(kiln_params_create(&params));
    CHECK(kiln_params_add(params, "x", ax));
    CHECK(kiln_params_add(params, "y", ay));
    CHECK(kiln_program_run_into(program, params, &az, 1));
    for (int i = 0; i < 6; ++i) printf("%g%s", z[i], i < 5 ? " " : "\n");
    kiln_params_destroy(params);
    kiln_argument_destroy(ax), kiln_argument_destroy(ay), kiln_argument_destroy(az);
    kiln_shape_destroy(shape);
    kiln_target_destroy(cpu);
    kiln_program_destroy(program);
    return 0;
}
