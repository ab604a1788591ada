"""Re-exports Bazel's native Java rules under the @rules_java names."""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_runtime = native.java_runtime
java_test = native.java_test
java_toolchain = native.java_toolchain
