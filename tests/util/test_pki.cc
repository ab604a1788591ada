#include "tests/util/test_pki.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/child_process.h"

namespace rill::tests::util {
namespace {

std::string FindOpenssl() {
  for (const char* p : {"/usr/bin/openssl", "/usr/local/bin/openssl", "/bin/openssl"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

class Openssl {
 public:
  Openssl(std::string binary, std::string dir) : binary_(std::move(binary)), dir_(std::move(dir)) {}

  absl::Status Run(std::vector<std::string> args) {
    args.insert(args.begin(), binary_);
    base::ChildProcess child;
    const std::string log = absl::StrCat(dir_, "/openssl.log");
    if (absl::Status s = child.Start(args, log); !s.ok()) return s;
    absl::StatusOr<int> code = child.Wait(absl::Seconds(60));
    if (!code.ok() || *code != 0) {
      return absl::InternalError(absl::StrCat("`", absl::StrJoin(args, " "), "` failed: ",
                                              code.ok() ? base::DescribeExitCode(*code)
                                                        : code.status().ToString(),
                                              "\n", ReadAll(log)));
    }
    return absl::OkStatus();
  }

  // A P-256 key and a self-signed CA certificate.
  absl::Status MakeCa(const std::string& name) {
    return Run({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", Path(name + ".key"), "-out", Path(name + ".pem"), "-days",
                "2", "-subj", "/CN=" + name, "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign"});
  }

  // A P-256 key and a certificate signed by `ca` with the given extensions.
  absl::Status MakeLeaf(const std::string& name, const std::string& ca,
                        const std::string& extensions, int serial) {
    const std::string ext = Path(name + ".ext");
    if (absl::Status s = WriteFile(ext, extensions); !s.ok()) return s;
    if (absl::Status s = Run({"req", "-new", "-newkey", "ec", "-pkeyopt",
                              "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                              Path(name + ".key"), "-out", Path(name + ".csr"), "-subj",
                              "/CN=" + name});
        !s.ok()) {
      return s;
    }
    return Run({"x509", "-req", "-in", Path(name + ".csr"), "-CA", Path(ca + ".pem"), "-CAkey",
                Path(ca + ".key"), "-set_serial", std::to_string(serial), "-days", "2",
                "-extfile", ext, "-out", Path(name + ".pem")});
  }

  std::string Path(const std::string& file) const { return absl::StrCat(dir_, "/", file); }

 private:
  std::string binary_;
  std::string dir_;
};

}  // namespace

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  const std::string binary = FindOpenssl();
  if (binary.empty()) return absl::NotFoundError("the openssl command is not installed");
  mkdir(dir.c_str(), 0700);
  Openssl ssl(binary, dir);
  // Server and client certificates may be used both ways (the engine's
  // certificate doubles as the frontends' client certificate under `rill serve`).
  const std::string server_ext =
      "basicConstraints=CA:FALSE\n"
      "keyUsage=critical,digitalSignature\n"
      "extendedKeyUsage=serverAuth,clientAuth\n"
      "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  const std::string client_ext =
      "basicConstraints=CA:FALSE\n"
      "keyUsage=critical,digitalSignature\n"
      "extendedKeyUsage=clientAuth\n";
  for (absl::Status s : {ssl.MakeCa("ca"), ssl.MakeCa("rogue-ca")}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = ssl.MakeLeaf("server", "ca", server_ext, 2); !s.ok()) return s;
  if (absl::Status s = ssl.MakeLeaf("client", "ca", client_ext, 3); !s.ok()) return s;
  if (absl::Status s = ssl.MakeLeaf("rogue", "rogue-ca", client_ext, 4); !s.ok()) return s;
  TestPki pki;
  pki.dir = dir;
  pki.ca_cert = ssl.Path("ca.pem");
  pki.server_cert = ssl.Path("server.pem");
  pki.server_key = ssl.Path("server.key");
  pki.client_cert = ssl.Path("client.pem");
  pki.client_key = ssl.Path("client.key");
  pki.rogue_cert = ssl.Path("rogue.pem");
  pki.rogue_key = ssl.Path("rogue.key");
  return pki;
}

}  // namespace rill::tests::util
