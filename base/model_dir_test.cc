#include "base/model_dir.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace rill::base {
namespace {

// Sets or unsets one environment variable for a test's scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(ModelDirTest, EnvironmentOverridesHome) {
  ScopedEnv dir("RILL_MODEL_DIR", "/models/here");
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(DefaultModelDir(), "/models/here");
  EXPECT_EQ(DefaultModelFilePath(), "/models/here/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(DefaultEmbedModelPath(), "/models/here/all-MiniLM-L6-v2");
}

TEST(ModelDirTest, UnsetOrEmptyFallsBackToHomeCache) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("RILL_MODEL_DIR", nullptr);
    EXPECT_EQ(DefaultModelDir(), "/home/someone/.cache/rill/models");
  }
  ScopedEnv dir("RILL_MODEL_DIR", "");
  EXPECT_EQ(DefaultModelDir(), "/home/someone/.cache/rill/models");
}

TEST(ModelDirTest, DefaultModelFileExistsLooksAtTheResolvedPath) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/models";
  ScopedEnv env("RILL_MODEL_DIR", dir.c_str());
  EXPECT_FALSE(DefaultModelFileExists());
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  std::ofstream(DefaultModelFilePath()) << "gguf";
  EXPECT_TRUE(DefaultModelFileExists());
}

}  // namespace
}  // namespace rill::base
