// The kiln tool's commands. Each returns the process exit code.
#pragma once
#include "cli_options.hpp"

namespace kiln::cli {

int cmd_read(const options& o);
int cmd_params(const options& o);
int cmd_compile(const options& o);
int cmd_run(const options& o);
int cmd_perf(const options& o);
int cmd_verify(const options& o);
int cmd_onnx_ops(const options& o);
int cmd_ops(const options& o);
int cmd_targets(const options& o);
int cmd_version(const options& o);
int cmd_serve(const options& o);

// Exit codes scripts rely on.
constexpr int exit_ok = 0;
constexpr int exit_mismatch = 1;
constexpr int exit_usage = 2;
constexpr int exit_model = 3;
constexpr int exit_runtime = 4;

// Peak resident set size of this process, in MiB.
double peak_rss_mb();

}  // namespace kiln::cli
