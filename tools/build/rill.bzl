"""Small macros so BUILD files stay short. All targets build with C++17."""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "CUDA_PATH")

_COPTS = ["-std=c++17", "-Wall", "-Wno-sign-compare", "-Wno-unused-function"]

def rill_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = _COPTS + copts, **kwargs)

def rill_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = _COPTS + copts, **kwargs)

def rill_cc_test(name, deps = [], copts = [], size = "small", **kwargs):
    """A GoogleTest test; links gtest_main unless the test brings its own main."""
    native.cc_test(
        name = name,
        copts = _COPTS + copts,
        size = size,
        deps = deps + ["//third_party:gtest_main"],
        **kwargs
    )

def rill_proto_library(name, srcs, proto_root, grpc = False, deps = [], **kwargs):
    """C++ code (and gRPC stubs with grpc = True) for srcs, rooted at proto_root.

    proto_root is the package-relative folder protoc uses as -I, so that
    srcs = ["rill/v1/x.proto"] with proto_root = "." gives #include "rill/v1/x.pb.h".
    """
    stems = [s[:-len(".proto")] for s in srcs]
    outs = [s + ".pb.h" for s in stems] + [s + ".pb.cc" for s in stems]
    if grpc:
        outs += [s + ".grpc.pb.h" for s in stems] + [s + ".grpc.pb.cc" for s in stems]
    pkg = native.package_name()
    root = pkg + ("/" + proto_root if proto_root != "." else "")
    cmd = "/usr/bin/protoc -I" + root + " --cpp_out=$(GENDIR)/" + root
    if grpc:
        cmd += " --grpc_out=$(GENDIR)/" + root + " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"
    cmd += " " + " ".join(["$(location " + s + ")" for s in srcs])
    native.genrule(
        name = name + "_gen",
        srcs = srcs + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = cmd,
    )
    native.filegroup(name = name + "_srcs", srcs = srcs + [d + "_srcs" for d in deps])
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = [proto_root],
        deps = deps + ["//third_party:grpc" if grpc else "//third_party:protobuf"],
        **kwargs
    )

def rill_cuda_library(name, srcs, hdrs = [], deps = [], **kwargs):
    """Compiles .cu files with nvcc for sm_80 and sm_90 and links cudart, cuBLAS, NCCL.

    Only call when CUDA_ENABLED; callers pick a CPU-only stand-in otherwise.
    """
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = ("%s/bin/nvcc -c -O3 -std=c++17 -Xcompiler -fPIC -I. " % CUDA_PATH) +
                  "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 " +
                  "-o $@ $(location " + src + ")",
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda"],
        **kwargs
    )

cuda_enabled = CUDA_ENABLED
