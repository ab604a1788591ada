// Shared plumbing of the seed-corpus makers (worker/loader/fuzz/make_seeds.cc,
// frontend/fuzz/make_seeds.cc): argument handling, one directory per fuzz
// target, and a failed write turning into a non-zero exit status.
#ifndef RILL_TOOLS_FUZZ_SEED_MAKER_H_
#define RILL_TOOLS_FUZZ_SEED_MAKER_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace rill::fuzz {

// Writes dir/name; a failure is printed and makes SeedMakerMain return 1.
void WriteSeed(const std::string& dir, const std::string& name, const std::string& bytes);

using SeedTarget = std::pair<std::string, std::function<void(const std::string& dir)>>;

// main() of a seed maker: `make_seeds OUT_DIR`. Creates OUT_DIR/<name> for
// every target and runs its writer there; returns the process exit status.
int SeedMakerMain(int argc, char** argv, const std::vector<SeedTarget>& targets);

}  // namespace rill::fuzz

#endif  // RILL_TOOLS_FUZZ_SEED_MAKER_H_
