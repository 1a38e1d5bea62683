// KvSessionService: the kvsession.v1.KvSession gRPC service on the callback
// (asynchronous) API, so thousands of idle streams hold no threads.
//
// Handlers validate the request on gRPC's thread, then hand the work to the
// TaskExecutor (anything that may block on disk) and the Engine (forward
// passes); the reactor completes from whichever thread finishes the work.
// Every absl::Status maps to the gRPC status code of the same number.
// Requests are parsed by ParsingCallbackService: one that does not parse is
// answered INVALID_ARGUMENT before any handler here runs.
//
// Ownership: borrows the model, session manager, engine and executor, which
// must outlive the server.
#ifndef KVSESSION_SERVICE_KVSESSION_SERVICE_H_
#define KVSESSION_SERVICE_KVSESSION_SERVICE_H_

#include <memory>
#include <string>

#include "kvsession/v1/kvsession.grpc.pb.h"
#include "model/model.h"
#include "service/engine.h"
#include "service/parsing_callback_service.h"
#include "service/input_resolver.h"
#include "service/migration_memory.h"
#include "service/session_migration.h"
#include "service/session_manager.h"
#include "service/task_executor.h"
#include "service/unsent_bytes.h"
#include "service/tenant_usage.h"

namespace kvs {

// Static facts GetServerInfo reports.
struct ServerFacts {
  std::string version;
  std::string model_path;
  std::string kernels;
  int max_batch_tokens = 0;
  // --chat-template: a chat family overriding the GGUF's template ("" =
  // detect). The caller checks the name (InputResolver::Create) first.
  std::string chat_template;
  // --replica-name: this replica in a fleet (docs/fleet.md).
  std::string replica;
};

class KvSessionService final : public ParsingCallbackService {
 public:
  KvSessionService(const Model& model, SessionManager* sessions, Engine* engine, TaskExecutor* io,
                   ServerFacts facts);
  // Enforces per-tenant quotas and reports them in GetServerInfo
  // (tenant_usage.h); borrowed, must outlive the service. Set before
  // serving; without it no tenant quota applies.
  void SetTenantUsage(TenantUsage* usage) { tenant_usage_ = usage; }
  // The RAM migration streams in flight may hold (migration_memory.h):
  // `total_bytes` in all, each tenant at most one stream's limit
  // (kMaxMigrationBytes). Default 2 GiB. Set before serving.
  void SetMigrationMemory(int64_t total_bytes) {
    migration_memory_ = std::make_unique<MigrationMemory>(total_bytes, kMaxMigrationBytes);
  }

  // How many encoded bytes a Generate stream may hold that its client has
  // not taken (generate_reactor.h); past them its generation stops and the
  // call ends RESOURCE_EXHAUSTED. Default 4 MiB. Set before serving.
  void SetMaxUnsentStreamBytes(int64_t bytes) { max_unsent_stream_bytes_ = bytes; }
  // All Generate streams' unsent bytes together (unsent_bytes.h); past
  // them, the stream that adds more stops likewise. Default 1 GiB. Set
  // before serving.
  void SetMaxUnsentBytes(int64_t bytes) { unsent_ = std::make_unique<UnsentBytes>(bytes); }
  // For the metrics.
  const UnsentBytes& unsent_bytes() const { return *unsent_; }
  const MigrationMemory& migration_memory() const { return *migration_memory_; }

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx,
                                          const kvsession::v1::CreateSessionRequest* request,
                                          kvsession::v1::Session* response) override;
  grpc::ServerUnaryReactor* Append(grpc::CallbackServerContext* ctx,
                                   const kvsession::v1::AppendRequest* request,
                                   kvsession::v1::AppendResponse* response) override;
  grpc::ServerWriteReactor<kvsession::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx, const kvsession::v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Fork(grpc::CallbackServerContext* ctx,
                                 const kvsession::v1::ForkRequest* request,
                                 kvsession::v1::ForkResponse* response) override;
  grpc::ServerUnaryReactor* Snapshot(grpc::CallbackServerContext* ctx,
                                     const kvsession::v1::SnapshotRequest* request,
                                     kvsession::v1::Checkpoint* response) override;
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* ctx,
                                    const kvsession::v1::RestoreRequest* request,
                                    kvsession::v1::Session* response) override;
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* ctx,
                                       const kvsession::v1::GetSessionRequest* request,
                                       kvsession::v1::Session* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* ctx,
                                         const kvsession::v1::ListSessionsRequest* request,
                                         kvsession::v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSession(grpc::CallbackServerContext* ctx,
                                          const kvsession::v1::DeleteSessionRequest* request,
                                          kvsession::v1::DeleteSessionResponse* response) override;
  grpc::ServerUnaryReactor* ListCheckpoints(grpc::CallbackServerContext* ctx,
                                            const kvsession::v1::ListCheckpointsRequest* request,
                                            kvsession::v1::ListCheckpointsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteCheckpoint(grpc::CallbackServerContext* ctx,
                                             const kvsession::v1::DeleteCheckpointRequest* request,
                                             kvsession::v1::DeleteCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* ctx,
                                          const kvsession::v1::GetServerInfoRequest* request,
                                          kvsession::v1::ServerInfo* response) override;
  // In kvsession_service_truncate.cc.
  grpc::ServerUnaryReactor* Truncate(grpc::CallbackServerContext* ctx,
                                     const kvsession::v1::TruncateRequest* request,
                                     kvsession::v1::TruncateResponse* response) override;

  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx,
                                     const kvsession::v1::TokenizeRequest* request,
                                     kvsession::v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* ctx,
                                       const kvsession::v1::DetokenizeRequest* request,
                                       kvsession::v1::DetokenizeResponse* response) override;

  // Migration, in kvsession_service_migrate.cc.
  grpc::ServerWriteReactor<kvsession::v1::ExportChunk>* ExportSession(
      grpc::CallbackServerContext* ctx, const kvsession::v1::ExportSessionRequest* request) override;
  grpc::ServerUnaryReactor* FindMissingPages(grpc::CallbackServerContext* ctx,
                                             const kvsession::v1::FindMissingPagesRequest* request,
                                             kvsession::v1::FindMissingPagesResponse* response) override;

 protected:
  grpc::ServerReadReactor<ParsedRequest<kvsession::v1::ImportChunk>>* ImportSessionParsed(
      grpc::CallbackServerContext* ctx, kvsession::v1::ImportSessionResponse* response) override;

 private:
  // What `input` (may be null) adds to an acquired session, and for a
  // Generate (`generate` set) its chat generation prompt
  // (service/input_resolver.h).
  absl::StatusOr<ResolvedInput> ResolveInput(const kvsession::v1::Input* input,
                                             const Session& session,
                                             const GenerationPromptChoice* generate = nullptr) const;
  absl::Status ValidateLabels(const google::protobuf::Map<std::string, std::string>& labels) const;
  // Runs an Append-style job (prefill only) on an acquired session under
  // `handle` (attached to the call before this); calls `done` with the
  // final status and usage from the executor.
  // Sets a new session's context policy and keep_tokens from its create
  // request (`input_tokens`: the create call's input). INVALID_ARGUMENT when
  // keep_tokens leaves no whole page of the context to drop (checked for
  // SLIDE, and whenever keep_tokens is given); nothing changes then.
  absl::Status SetContextPolicy(ContextPolicy policy, const kvsession::v1::CreateSessionRequest& request,
                                size_t input_tokens, Session* session) const;
  void RunPrefillJob(std::shared_ptr<Session> session, ResolvedInput input,
                     int prompt_tokens, std::shared_ptr<JobHandle> handle, absl::Time deadline,
                     std::function<void(const absl::Status&, const JobUsage&, const SessionInfo&)> done);
  SamplingParams ServerDefaultSampling() const;
  // Tokenize's work (on tokenizing_): the ids, or its error.
  absl::Status TokenizeNow(const kvsession::v1::TokenizeRequest& request,
                           kvsession::v1::TokenizeResponse* response) const;
  // For a call that made new sessions (`ids`) and is about to answer: if
  // the call has ended meanwhile (the client cancelled, or its deadline
  // passed, while the sessions were written), the client can never learn
  // their ids, so they are deleted (best effort: one another call holds
  // stays) and the call answers CANCELLED. Returns whether it ended so;
  // false: answer as usual. gRPC leaves a window between this check and
  // the reply reaching the client; docs/api.md says what a client does.
  bool DeleteSessionsOfEndedCall(grpc::CallbackServerContext* ctx, const std::vector<std::string>& ids,
                                 grpc::ServerUnaryReactor* reactor) const;

  const Model& model_;
  SessionManager* const sessions_;
  Engine* const engine_;
  TaskExecutor* const io_;
  const ServerFacts facts_;
  const InputResolver inputs_;
  TenantUsage* tenant_usage_ = nullptr;
  int64_t max_unsent_stream_bytes_ = int64_t{4} << 20;
  std::unique_ptr<UnsentBytes> unsent_ = std::make_unique<UnsentBytes>(int64_t{1} << 30);
  // Tokenize calls with more than kInlineTokenizeBytes of input, one at a
  // time, off gRPC's callback threads; past kMaxQueuedTokenizes waiting,
  // RESOURCE_EXHAUSTED.
  static constexpr size_t kInlineTokenizeBytes = size_t{16} << 10;
  static constexpr int kMaxQueuedTokenizes = 16;
  std::unique_ptr<TaskExecutor> tokenizing_ =
      std::make_unique<TaskExecutor>(1, /*max_spare_threads=*/0, "kvs-tokenize");
  std::unique_ptr<MigrationMemory> migration_memory_ =
      std::make_unique<MigrationMemory>(int64_t{2} << 30, kMaxMigrationBytes);
  // Admits an engine job on a held session against its tenant's quotas
  // (null claim when no quotas apply).
  absl::StatusOr<std::shared_ptr<TenantClaim>> AdmitJob(const Session& s, int64_t new_tokens,
                                                      bool generate) const {
    if (tenant_usage_ == nullptr) return std::shared_ptr<TenantClaim>();
    return tenant_usage_->AdmitJob(s, new_tokens, generate);
  }
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_KVSESSION_SERVICE_H_
