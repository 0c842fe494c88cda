/* The C workflow of c_workflow.c, called from the GoogleTest harness. */
#ifndef KILN_TESTS_C_WORKFLOW_H
#define KILN_TESTS_C_WORKFLOW_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
/* 1 when every step passed; else 0 and `report` says which step failed and why. */
int kiln_c_workflow(const char* model_dir, int data_sets, const char* kiln_path, char* report, size_t report_size);
#ifdef __cplusplus
}
#endif
#endif
