#include "tools/fuzz/seed_maker.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

namespace rill::fuzz {
namespace {

int g_failures = 0;

}  // namespace

void WriteSeed(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out << bytes;
  out.close();
  if (!out) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    ++g_failures;
  }
}

int SeedMakerMain(int argc, char** argv, const std::vector<SeedTarget>& targets) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  mkdir(root.c_str(), 0755);
  for (const SeedTarget& t : targets) {
    const std::string dir = root + "/" + t.first;
    mkdir(dir.c_str(), 0755);
    t.second(dir);
  }
  return g_failures == 0 ? 0 : 1;
}

}  // namespace rill::fuzz
