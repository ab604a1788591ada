#include "base/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace rill::base {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the TLS ", what, " '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string pem = ss.str();
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS ", what, " '", path, "' is not a PEM file"));
  }
  return pem;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// gRPC only reports a bad pair at the first handshake (or as a bare "cannot
// listen"), so the pair is checked here, at start-up, with the file names.
absl::Status CheckKeyPair(const std::string& cert_pem, const std::string& cert_path,
                          const std::string& key_pem, const std::string& key_path) {
  std::unique_ptr<X509, X509Free> cert(
      PEM_read_bio_X509(MemBio(cert_pem).get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS certificate '", cert_path, "' holds no PEM certificate"));
  }
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_bio_PrivateKey(MemBio(key_pem).get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the TLS key '", key_path, "' holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("the TLS key '", key_path,
                                                   "' does not match the certificate '",
                                                   cert_path, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckCertificates(const std::string& pem, const std::string& path, const char* what) {
  std::unique_ptr<X509, X509Free> cert(
      PEM_read_bio_X509(MemBio(pem).get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS ", what, " '", path, "' holds no PEM certificate"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (files.empty()) return grpc::InsecureServerCredentials();
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate and a key (a client CA alone enables nothing)");
  }
  absl::StatusOr<std::string> cert = ReadPem(files.cert, "certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(files.key, "key");
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckKeyPair(*cert, files.cert, *key, files.key); !s.ok()) return s;
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(files.ca, "client CA");
    if (!ca.ok()) return ca.status();
    if (absl::Status s = CheckCertificates(*ca, files.ca, "client CA"); !s.ok()) return s;
    options.pem_root_certs = *ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files) {
  if (files.empty()) return grpc::InsecureChannelCredentials();
  if (files.ca.empty()) {
    return absl::InvalidArgumentError("a TLS channel needs the CA that signed the server's certificate");
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("a client certificate needs its key, and a key its certificate");
  }
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem(files.ca, "CA");
  if (!ca.ok()) return ca.status();
  if (absl::Status s = CheckCertificates(*ca, files.ca, "CA"); !s.ok()) return s;
  options.pem_root_certs = *ca;
  if (!files.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(files.cert, "client certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(files.key, "client key");
    if (!key.ok()) return key.status();
    if (absl::Status s = CheckKeyPair(*cert, files.cert, *key, files.key); !s.ok()) return s;
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

}  // namespace rill::base
