// `rill bench-model`: prompt-processing and batched-decode throughput of the
// model runtime alone (no engine, no gRPC), for bench/model_runtime_bench.sh.
#ifndef RILL_CLI_BENCH_MODEL_COMMAND_H_
#define RILL_CLI_BENCH_MODEL_COMMAND_H_

namespace rill::cli {

int RunBenchModel(int argc, char** argv);

}  // namespace rill::cli

#endif  // RILL_CLI_BENCH_MODEL_COMMAND_H_
