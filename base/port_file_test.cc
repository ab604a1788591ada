#include "base/port_file.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace rill::base {
namespace {

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

TEST(PortFileTest, WritesThePortAndNoTemporary) {
  const std::string path = TempDir() + "/engine.port";
  ASSERT_TRUE(WritePortFile(path, 50123).ok());
  std::ifstream in(path);
  int port = 0;
  in >> port;
  EXPECT_EQ(port, 50123);
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
}

TEST(PortFileTest, MissingDirectoryIsAClearError) {
  const std::string path = TempDir() + "/no/such/dir/engine.port";
  absl::Status s = WritePortFile(path, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no/such/dir"), std::string::npos) << s;
}

}  // namespace
}  // namespace rill::base
