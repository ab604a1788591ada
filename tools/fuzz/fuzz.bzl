"""rill_fuzz_test: a libFuzzer target run in CI as a normal test.

The target's LLVMFuzzerTestOneInput is linked with //tools/fuzz:standalone_driver.cc
(gcc, no sanitizers), which replays `corpus` (a folder of this package) and then runs
a few seconds of seeded random mutations of it. The same source builds with
clang -fsanitize=fuzzer for real fuzzing (tools/fuzz/run_fuzzers.sh).
"""

load("//tools/build:rill.bzl", "rill_cc_test")

def rill_fuzz_test(name, srcs, corpus, deps = [], args = [], data = [], **kwargs):
    pkg = native.package_name()
    rill_cc_test(
        name = name,
        srcs = srcs + ["//tools/fuzz:standalone_driver.cc"],
        deps = deps + ["//third_party:absl"],
        data = data + native.glob([corpus + "/**"]),
        args = args + [pkg + "/" + corpus],
        **kwargs
    )
