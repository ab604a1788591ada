// trim_gguf --in=model.gguf --out=cut.gguf --layers=6: a copy of a GGUF
// checkpoint with only its first N decoder layers (see gguf_trim.h).
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "worker/loader/gguf.h"
#include "worker/models/cuda/gguf_trim.h"

ABSL_FLAG(std::string, in, "", "input GGUF file");
ABSL_FLAG(std::string, out, "", "output GGUF file");
ABSL_FLAG(int, layers, 8, "decoder layers to keep");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_in).empty() || absl::GetFlag(FLAGS_out).empty()) {
    fprintf(stderr, "usage: trim_gguf --in=IN.gguf --out=OUT.gguf --layers=N\n");
    return 2;
  }
  auto in = rill::worker::loader::GgufFile::Open(absl::GetFlag(FLAGS_in));
  if (!in.ok()) {
    fprintf(stderr, "trim_gguf: %s\n", in.status().ToString().c_str());
    return 1;
  }
  absl::Status s =
      rill::worker::WriteTrimmedGguf(**in, absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_out));
  if (!s.ok()) {
    fprintf(stderr, "trim_gguf: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
