// Finds the project venv's python for tests that use numpy references.
#ifndef RILL_KERNELS_CPU_TEST_PYTHON_H_
#define RILL_KERNELS_CPU_TEST_PYTHON_H_

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace rill::cpu::testing {

// $RILL_VENV/bin/python; when RILL_VENV is unset, the .venv at the root of
// the source tree that `script` (a runfiles-relative path) links into.
// Returns "" if neither exists.
inline std::string VenvPython(const std::string& script, const std::string& script_rel_to_root) {
  std::string venv;
  if (const char* v = getenv("RILL_VENV"); v != nullptr && v[0] != '\0') {
    venv = v;
  } else {
    char buf[PATH_MAX];
    if (realpath(script.c_str(), buf) != nullptr) {
      std::string real = buf;
      if (real.size() > script_rel_to_root.size() &&
          real.compare(real.size() - script_rel_to_root.size(), std::string::npos,
                       script_rel_to_root) == 0) {
        venv = real.substr(0, real.size() - script_rel_to_root.size()) + ".venv";
      }
    }
  }
  if (venv.empty()) return "";
  const std::string py = venv + "/bin/python";
  return access(py.c_str(), X_OK) == 0 ? py : "";
}

}  // namespace rill::cpu::testing

#endif  // RILL_KERNELS_CPU_TEST_PYTHON_H_
