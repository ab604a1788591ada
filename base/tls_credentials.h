// gRPC credentials from PEM files, for every Rill listener and channel:
// plaintext when no file is given (loopback and trusted pod networks), TLS
// with a certificate and key, mutual TLS when a CA is given to a server
// (clients must present a certificate it signed). Files are read once, at
// start-up; a missing or unreadable one, or a key that does not match its
// certificate, is an InvalidArgument naming the file.
#ifndef RILL_BASE_TLS_CREDENTIALS_H_
#define RILL_BASE_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace rill::base {

struct TlsFiles {
  std::string cert;  // PEM certificate chain
  std::string key;   // PEM private key
  std::string ca;    // PEM CA bundle: server: verify clients (mTLS); channel: verify the server
  bool empty() const { return cert.empty() && key.empty() && ca.empty(); }
};

// Server side: cert + key (TLS), plus ca (mutual TLS), or nothing (plaintext).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// Channel side: ca (TLS, the server must present a certificate it signed),
// plus cert + key (our client certificate, for mutual TLS), or nothing
// (plaintext).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files);

}  // namespace rill::base

#endif  // RILL_BASE_TLS_CREDENTIALS_H_
