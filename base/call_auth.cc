#include "base/call_auth.h"

#include <grpcpp/support/client_interceptor.h>

#include "absl/strings/str_cat.h"

namespace rill::base {
namespace {

using grpc::experimental::ClientInterceptorFactoryInterface;
using grpc::experimental::ClientRpcInfo;
using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::Interceptor;
using grpc::experimental::InterceptorBatchMethods;

class AddMetadata final : public Interceptor {
 public:
  explicit AddMetadata(const CallMetadata* metadata) : metadata_(metadata) {}
  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      std::multimap<std::string, std::string>* md = methods->GetSendInitialMetadata();
      for (const auto& [key, value] : *metadata_) md->emplace(key, value);
    }
    methods->Proceed();
  }

 private:
  const CallMetadata* metadata_;  // Owned by the factory, which the channel keeps.
};

class AddMetadataFactory final : public ClientInterceptorFactoryInterface {
 public:
  explicit AddMetadataFactory(CallMetadata metadata) : metadata_(std::move(metadata)) {}
  Interceptor* CreateClientInterceptor(ClientRpcInfo*) override {
    return new AddMetadata(&metadata_);
  }

 private:
  const CallMetadata metadata_;
};

// The value of `key` (the first one), or null when absent.
const grpc::string_ref* FindMetadata(const grpc::ServerContext& ctx, absl::string_view key) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  return it == md.end() ? nullptr : &it->second;
}

}  // namespace

bool SecretEquals(absl::string_view got, absl::string_view want) {
  volatile unsigned char diff = got.size() != want.size() ? 1 : 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const unsigned char g = i < got.size() ? static_cast<unsigned char>(got[i]) : 0;
    diff = diff | (g ^ static_cast<unsigned char>(want[i]));
  }
  return diff == 0;
}

grpc::Status CheckEngineSecret(const grpc::ServerContext& ctx, const std::string& secret) {
  const grpc::string_ref* got = FindMetadata(ctx, kEngineSecretMetadata);
  if (got == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("engine: missing `", kEngineSecretMetadata, "` metadata"));
  }
  if (!SecretEquals(absl::string_view(got->data(), got->size()), secret)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "engine: invalid engine secret");
  }
  return grpc::Status::OK;
}

grpc::Status CheckAdminToken(const grpc::ServerContext& ctx, const std::string& token) {
  const grpc::string_ref* got = FindMetadata(ctx, "authorization");
  if (got == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "admin: missing `authorization: Bearer <token>` metadata");
  }
  if (!SecretEquals(absl::string_view(got->data(), got->size()), absl::StrCat("Bearer ", token))) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "admin: invalid token");
  }
  return grpc::Status::OK;
}

CallMetadata EngineCallMetadata(const std::string& engine_secret, const std::string& admin_token) {
  CallMetadata md;
  if (!engine_secret.empty()) md.emplace_back(kEngineSecretMetadata, engine_secret);
  if (!admin_token.empty()) md.emplace_back("authorization", absl::StrCat("Bearer ", admin_token));
  return md;
}

std::shared_ptr<grpc::Channel> CreateChannelWithMetadata(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, CallMetadata metadata) {
  std::vector<std::unique_ptr<ClientInterceptorFactoryInterface>> interceptors;
  if (!metadata.empty()) {
    interceptors.push_back(std::make_unique<AddMetadataFactory>(std::move(metadata)));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace rill::base
