"""Detects the CUDA toolkit and writes @local_cuda with what it found.

@local_cuda//:defs.bzl exports CUDA_ENABLED and CUDA_PATH; @local_cuda//:cuda
links cudart, cuBLAS and NCCL when the toolkit exists and is empty otherwise.
"""

def _cuda_configure_impl(ctx):
    disabled = ctx.os.environ.get("RILL_DISABLE_CUDA", "0") not in ["", "0"]
    path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    enabled = (not disabled) and ctx.path(path + "/bin/nvcc").exists
    ctx.file("defs.bzl", "CUDA_ENABLED = %s\nCUDA_PATH = %r\n" % (enabled, path if enabled else ""))
    if enabled:
        lib = path + "/lib64"
        linkopts = ["-L" + lib, "-Wl,-rpath," + lib, "-lcublas", "-lcudart", "-lnccl"]
    else:
        linkopts = []
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
exports_files(["defs.bzl"])
cc_library(
    name = "cuda",
    linkopts = %r,
)
""" % linkopts)

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "RILL_DISABLE_CUDA"],
    local = True,
)
