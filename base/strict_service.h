// Serves a generated gRPC service's unary methods with base::ParseStrict in
// place of gRPC's own parse, which answers bytes that do not parse with
// INTERNAL and an empty message, and keeps unknown fields. Every Rill server
// (frontend, engine, health) derives from this, so one policy holds for all
// RPCs (see strict_parse.h).
#ifndef RILL_BASE_STRICT_SERVICE_H_
#define RILL_BASE_STRICT_SERVICE_H_

#include <string>

#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/method_handler.h>

#include "absl/strings/str_cat.h"
#include "base/strict_parse.h"

namespace rill::base {

// `Api` is a generated service class (e.g. rill::v1::Inference): derive the
// implementation from StrictService<Api> instead of Api::Service and call
// ParseStrictly for each unary method in its constructor (a test sends bad
// bytes to every method of the descriptor, so a forgotten one shows).
template <class Api>
class StrictService : public Api::Service {
 protected:
  // Runs before a request's bytes are read: a non-OK status answers the call
  // (e.g. UNAUTHENTICATED, so a caller without a credential learns nothing
  // about what it sent).
  virtual grpc::Status Admit(grpc::ServerContext* ctx) { return grpc::Status::OK; }

  // Serves unary method `name` by calling `method` on `self` with the request
  // parsed by ParseStrict; bytes that break the policy get INVALID_ARGUMENT
  // "malformed <type>: ..." and never reach `method`. Constructor only.
  template <class Impl, class Req, class Resp>
  void ParseStrictly(Impl* self, const std::string& name,
                     grpc::Status (Impl::*method)(grpc::ServerContext*, const Req*, Resp*)) {
    // Marked "streamed": gRPC then hands over the raw bytes (one read, one
    // write: a unary call on the wire all the same).
    this->MarkMethodStreamed(
        UnaryMethodIndex(name, Req::descriptor(), Resp::descriptor()),
        new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, Resp>(
            [this, self, method](grpc::ServerContext* ctx,
                           grpc::ServerUnaryStreamer<grpc::ByteBuffer, Resp>* stream) {
              if (grpc::Status admitted = Admit(ctx); !admitted.ok()) return admitted;
              grpc::ByteBuffer bytes;
              Req request;
              if (!stream->Read(&bytes)) {
                return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    absl::StrCat("malformed ", Req::descriptor()->full_name(),
                                                 ": no request message"));
              }
              if (absl::Status s = ParseStrict(bytes, &request); !s.ok()) {
                return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
              }
              Resp response;
              grpc::Status s = (self->*method)(ctx, &request, &response);
              if (s.ok()) stream->Write(response);
              return s;
            }));
  }

 private:
  // The method's index in the generated service (descriptor order).
  static int UnaryMethodIndex(const std::string& name, const google::protobuf::Descriptor* req,
                              const google::protobuf::Descriptor* resp) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            Api::service_full_name());
    CHECK(service != nullptr) << Api::service_full_name();
    const google::protobuf::MethodDescriptor* m = service->FindMethodByName(name);
    CHECK(m != nullptr) << Api::service_full_name() << " has no method " << name;
    CHECK(!m->client_streaming() && !m->server_streaming()) << name << " is not unary";
    CHECK(m->input_type() == req && m->output_type() == resp) << name << ": wrong types";
    return m->index();
  }
};

}  // namespace rill::base

#endif  // RILL_BASE_STRICT_SERVICE_H_
