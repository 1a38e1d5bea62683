// The fuzz targets' server: a real KvSessionService (real engine, RocksDB
// store in a temporary directory, a tiny synthesized model: 1 layer, dim
// 32, 2 query heads and 1 KV head of 16, 256 byte tokens, context 128, f16
// KV in pages of 16 tokens) serving in this process on a loopback port,
// and a channel and stub to it.
//
// With tenants (StartFuzzServer's `with_tenants`), calls authenticate with
// API keys as kvsessiond --auth-keys has them: kAdminKey (tenant "ops",
// admin), kAcmeKey (tenant "acme", user, with small quotas: 12 sessions,
// 6 checkpoints, 64 KiB of store) and kBetaKey (tenant "beta", user), and
// sessions belong to their tenants (SessionOwnership, TenantUsage).
//
// Built once per process by StartFuzzServer and never torn down (everything
// stays reachable, so LeakSanitizer has nothing to report); its directory
// is removed at exit. Fail() ends the process as a finding.
#ifndef KVSESSION_FUZZ_FUZZ_SERVER_H_
#define KVSESSION_FUZZ_FUZZ_SERVER_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "cache/page_pool.h"
#include "cache/session_store.h"
#include "kvsession/v1/kvsession.grpc.pb.h"
#include "model/model.h"
#include "service/auth/api_key_file.h"
#include "service/auth/authenticator.h"
#include "service/auth/session_ownership.h"
#include "service/auth/tenant_quotas.h"
#include "service/engine.h"
#include "service/kvsession_service.h"
#include "service/model_fingerprint.h"
#include "service/session_manager.h"
#include "service/task_executor.h"
#include "service/tenant_usage.h"
#include "tools/model_synth.h"

namespace kvs::fuzz {

[[noreturn]] inline void Fail(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", target, what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

inline constexpr char kAdminKey[] = "fuzz-admin-key";
inline constexpr char kAcmeKey[] = "fuzz-acme-key";
inline constexpr char kBetaKey[] = "fuzz-beta-key";

struct FuzzServer {
  std::string dir;
  std::string fingerprint;  // the model file's (service/model_fingerprint.h)
  KvGeometry geometry;
  std::unique_ptr<Model> model;
  std::unique_ptr<SessionStore> store;
  std::unique_ptr<PagePool> pool;
  // With tenants only; declared (so built and destroyed) in kvsessiond's
  // order: the quotas before the sessions whose registry reads them, the
  // usage after the sessions and before the engine whose jobs hold claims
  // on it.
  std::unique_ptr<TenantQuotas> quotas;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<TaskExecutor> io;
  std::unique_ptr<TaskExecutor> completions;
  std::unique_ptr<SessionManager> sessions;
  std::unique_ptr<TenantUsage> tenant_usage;
  std::unique_ptr<SessionOwnership> ownership;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<KvSessionService> service;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<kvsession::v1::KvSession::Stub> stub;
};

// The server of `target` (the name its failures and directory carry), with
// at most `max_sessions` sessions; `with_tenants`: API keys and tenants
// as above.
inline FuzzServer* StartFuzzServer(const char* target, int max_sessions, bool with_tenants = false) {
  auto must = [target](const auto& v, const char* what) {
    if (!v.ok()) Fail(target, absl::StrCat(what, ": ", v.status().ToString()));
  };
  auto* s = new FuzzServer;
  s->dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/kvs_", target, ".", getpid());
  std::filesystem::remove_all(s->dir);
  std::filesystem::create_directories(s->dir);
  const std::string model_path = s->dir + "/model.gguf";
  SynthSpec spec;
  spec.n_layers = 1;
  spec.dim = 32;
  spec.n_heads = 2;
  spec.n_kv_heads = 1;
  spec.ffn_dim = 64;
  spec.context_length = 128;
  if (absl::Status st = WriteSynthModel(spec, model_path); !st.ok()) Fail(target, st.ToString());
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(model_path);
  must(model, "model");
  s->model = *std::move(model);
  absl::StatusOr<std::string> fingerprint = FingerprintFile(model_path);
  must(fingerprint, "fingerprint");
  s->fingerprint = *fingerprint;
  StoreOptions store_options;
  store_options.sync_writes = false;
  absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(s->dir + "/data", store_options);
  must(store, "store");
  s->store = *std::move(store);
  const ModelConfig& c = s->model->config();
  s->geometry.n_layers = c.n_layers;
  s->geometry.n_kv_heads = c.n_kv_heads;
  s->geometry.head_dim = c.head_dim;
  s->geometry.page_tokens = 16;
  s->geometry.dtype = KvDtype::kF16;
  s->pool = std::make_unique<PagePool>(s->geometry, 1024);
  ServiceLimits limits;
  limits.max_sessions = max_sessions;
  limits.max_context = c.context_length;
  limits.max_tokens_per_generate = 32;
  limits.max_fork_count = 4;
  limits.max_input_bytes = 4096;
  s->io = std::make_unique<TaskExecutor>(2);
  s->completions = std::make_unique<TaskExecutor>(2);
  s->sessions = std::make_unique<SessionManager>(*s->model, s->pool.get(), s->store.get(), s->fingerprint, limits);
  if (absl::Status st = s->sessions->LoadFromStore(); !st.ok()) Fail(target, st.ToString());
  EngineOptions engine_options;
  engine_options.threads = 1;
  s->engine = std::make_unique<Engine>(*s->model, s->sessions.get(), s->completions.get(), engine_options);
  s->service = std::make_unique<KvSessionService>(*s->model, s->sessions.get(), s->engine.get(), s->io.get(),
                                                  ServerFacts{.version = "fuzz",
                                                              .model_path = model_path,
                                                              .kernels = "fuzz",
                                                              .max_batch_tokens = engine_options.max_batch_tokens,
                                                              .chat_template = "",
                                                              .replica = "fuzz"});
  if (with_tenants) {
    absl::StatusOr<ApiKeyFile> keys = ParseApiKeyFile(absl::StrCat(
        "ops admin ", Sha256Hex(kAdminKey), "\n",
        "acme user ", Sha256Hex(kAcmeKey), " max_sessions=12 max_checkpoints=6 max_store_bytes=65536\n",
        "beta user ", Sha256Hex(kBetaKey), "\n"));
    must(keys, "API keys");
    s->quotas = std::make_unique<TenantQuotas>(QuotaLimits{}, *keys);
    s->authenticator = std::make_unique<Authenticator>(*std::move(keys), "fuzz");
    s->tenant_usage = std::make_unique<TenantUsage>(s->sessions.get(), s->quotas.get());
    s->ownership = std::make_unique<SessionOwnership>(s->sessions.get());
    s->service->SetAuthenticator(s->authenticator.get());
    s->service->SetAccessPolicy(s->ownership.get());
    s->service->SetTenantUsage(s->tenant_usage.get());
  }
  // Loopback TCP, not InProcessChannel: gRPC 1.51's in-process transport
  // never frees server-streaming calls (about 12 KB per Generate; not so
  // over TCP), which would grow the fuzzer to its RSS limit.
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(s->service.get());
  s->server = builder.BuildAndStart();
  if (!s->server || port == 0) Fail(target, "the server did not start");
  s->channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  s->stub = kvsession::v1::KvSession::NewStub(s->channel);
  static std::string dir_at_exit;
  dir_at_exit = s->dir;
  std::atexit([] { std::filesystem::remove_all(dir_at_exit); });
  return s;
}

// Whether a call's status is one a client can act on: OK, INVALID_ARGUMENT,
// NOT_FOUND, FAILED_PRECONDITION, OUT_OF_RANGE, RESOURCE_EXHAUSTED or
// ABORTED. UNKNOWN, INTERNAL, UNIMPLEMENTED, DATA_LOSS, UNAVAILABLE and
// DEADLINE_EXCEEDED (a hang) are findings.
inline bool Actionable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
      return true;
    default:
      return false;
  }
}

}  // namespace kvs::fuzz

#endif  // KVSESSION_FUZZ_FUZZ_SERVER_H_
