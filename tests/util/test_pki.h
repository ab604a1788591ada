// A throw-away certificate authority for TLS tests, made with the openssl
// command at test time in a temporary directory (keys are never committed):
// a CA, a server certificate for 127.0.0.1 / localhost, a client
// certificate it signed, and a client certificate from an unrelated CA.
#ifndef RILL_TESTS_UTIL_TEST_PKI_H_
#define RILL_TESTS_UTIL_TEST_PKI_H_

#include <string>

#include "absl/status/statusor.h"

namespace rill::tests::util {

struct TestPki {
  std::string dir;
  std::string ca_cert;
  std::string server_cert;  // SAN IP:127.0.0.1, DNS:localhost; usable as a client cert too.
  std::string server_key;
  std::string client_cert;  // Signed by ca_cert.
  std::string client_key;
  std::string rogue_cert;   // Signed by another CA: must be refused by mTLS servers.
  std::string rogue_key;
};

// Creates `dir` (if needed) and the files; fails with the openssl output
// when the command is missing or fails.
absl::StatusOr<TestPki> MakeTestPki(const std::string& dir);

}  // namespace rill::tests::util

#endif  // RILL_TESTS_UTIL_TEST_PKI_H_
