// KvSessionService's migration RPCs: ExportSession (a stream of chunks of
// a migration stream), ImportSession (reads one, checks it whole, imports
// it) and FindMissingPages (dedup). The work is SessionManager::Export /
// Import (session_migration.cc) on the request executor; the stream format
// is cache/migration_stream.h.
#include <algorithm>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/migration_stream.h"
#include "service/grpc_status.h"
#include "service/kvsession_service.h"
#include "service/request_checks.h"
#include "service/tenant_usage.h"

namespace kvs {
namespace v1 = kvsession::v1;
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr int kMaxPageHashes = 1000000;

// Reads repeated 16-byte hashes; INVALID_ARGUMENT naming the field.
absl::Status ReadHashes(const char* field, const google::protobuf::RepeatedPtrField<std::string>& in,
                        std::vector<PageHash>* out) {
  if (in.size() > kMaxPageHashes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " holds ", in.size(), " hashes; at most ", kMaxPageHashes));
  }
  for (int i = 0; i < in.size(); ++i) {
    std::optional<PageHash> h = PageHash::FromBytes(in[i]);
    if (!h) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] must be 16 bytes, got ", in[i].size()));
    }
    out->push_back(*h);
  }
  return absl::OkStatus();
}

// Writes `first`, then `bytes` in chunks of kChunkBytes (each copied out
// when its turn comes, so the stream is held once), one in flight at a
// time, then finishes; holds the memory lease of the stream until then.
class ChunkWriter : public grpc::ServerWriteReactor<v1::ExportChunk> {
 public:
  void Start(v1::ExportChunk first, std::string bytes = {}, MigrationMemory::Lease lease = {}) {
    chunk_ = std::move(first);
    bytes_ = std::move(bytes);
    lease_ = std::move(lease);
    chunk_.set_data(bytes_.substr(0, kChunkBytes));
    sent_ = chunk_.data().size();
    StartWrite(&chunk_);
  }
  void Fail(const absl::Status& status) { Finish(ToGrpc(status)); }
  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    if (sent_ == bytes_.size()) return Finish(grpc::Status::OK);
    chunk_.Clear();
    chunk_.set_data(bytes_.substr(sent_, kChunkBytes));
    sent_ += chunk_.data().size();
    StartWrite(&chunk_);
  }
  void OnDone() override { delete this; }

 private:
  v1::ExportChunk chunk_;  // the one in flight
  std::string bytes_;
  size_t sent_ = 0;  // bytes_ handed to chunks so far
  MigrationMemory::Lease lease_;
};

// The tenant whose share of MigrationMemory a call uses: "" (the whole
// total) on a server without API keys, where every caller is one tenant.
std::string MigrationTenant(bool authenticating, const absl::StatusOr<Principal>& caller) {
  if (!authenticating) return std::string();
  return caller.ok() ? caller->tenant : std::string(kDefaultTenant);
}

}  // namespace

grpc::ServerWriteReactor<v1::ExportChunk>* KvSessionService::ExportSession(
    grpc::CallbackServerContext* ctx, const v1::ExportSessionRequest* request) {
  auto* reactor = new ChunkWriter();
  ExportRequest what;
  absl::Status st;
  std::vector<PageHash> omit;
  switch (request->source_case()) {
    case v1::ExportSessionRequest::kSessionId:
      st = CheckSessionId("session_id", request->session_id());
      what.id = request->session_id();
      break;
    case v1::ExportSessionRequest::kCheckpointId:
      st = CheckCheckpointId("checkpoint_id", request->checkpoint_id());
      what.id = request->checkpoint_id();
      what.checkpoint = true;
      break;
    default:
      st = absl::InvalidArgumentError("give session_id or checkpoint_id to export");
  }
  if (st.ok()) st = ReadHashes("omit_pages", request->omit_pages(), &omit);
  if (!st.ok()) {
    reactor->Fail(st);
    return reactor;
  }
  what.omit.insert(omit.begin(), omit.end());
  io_->Submit([this, reactor, what = std::move(what), hashes_only = request->page_hashes_only(),
               tenant = MigrationTenant(authenticating(), CallerOf(ctx))] {
    if (hashes_only) {  // the stored record's list, no page read
      absl::StatusOr<SessionRecord> record =
          what.checkpoint ? [&]() -> absl::StatusOr<SessionRecord> {
            absl::StatusOr<CheckpointRecord> c = sessions_->store()->GetCheckpoint(what.id);
            if (!c.ok()) return c.status();
            return c->session();
          }()
                          : sessions_->store()->GetSession(what.id);
      if (absl::IsNotFound(record.status())) {
        return reactor->Fail(absl::NotFoundError(
            absl::StrCat(what.checkpoint ? "no checkpoint '" : "no session '", what.id, "'")));
      }
      if (!record.ok()) return reactor->Fail(record.status());
      v1::ExportChunk chunk;
      for (const std::string& h : record->page_hashes()) chunk.add_page_hashes(h);
      return reactor->Start(std::move(chunk));
    }
    // The stream counts against the migration memory as it is built, and
    // until the client has read it all (or gone).
    absl::StatusOr<MigrationMemory::Lease> lease = migration_memory_->Take(tenant, 0);
    if (!lease.ok()) return reactor->Fail(lease.status());
    ExportRequest request = what;
    request.reserve = [&lease](int64_t bytes) {
      return bytes > lease->bytes() ? lease->Grow(bytes - lease->bytes()) : absl::OkStatus();
    };
    absl::StatusOr<ExportedStream> out = sessions_->Export(request);
    if (!out.ok()) return reactor->Fail(out.status());
    if (absl::Status st = request.reserve(static_cast<int64_t>(out->bytes.size())); !st.ok()) {
      return reactor->Fail(st);
    }
    v1::ExportChunk first;
    for (const PageHash& h : out->page_hashes) first.add_page_hashes(std::string(h.view()));
    first.set_total_bytes(static_cast<int64_t>(out->bytes.size()));
    first.set_pages_sent(out->pages_sent);
    first.set_pages_omitted(out->pages_omitted);
    reactor->Start(std::move(first), std::move(out->bytes), *std::move(lease));
  });
  return reactor;
}

namespace {

// Collects an ImportSession's chunks (bounded by kMaxMigrationBytes and
// by its lease of MigrationMemory), then hands the whole stream to
// `import` on the request executor. A stream whose first bytes are not a
// migration stream's is refused at once.
class ImportReader : public grpc::ServerReadReactor<ParsedRequest<v1::ImportChunk>> {
 public:
  using ImportFn = std::function<absl::Status(std::string stream)>;
  ImportReader(TaskExecutor* io, MigrationMemory::Lease lease, ImportFn import)
      : io_(io), import_(std::move(import)), lease_(std::move(lease)) {
    StartRead(&chunk_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed: the stream is complete
      io_->Submit([this] { Finish(ToGrpc(import_(std::move(stream_)))); });
      return;
    }
    if (!chunk_.status.ok()) return Finish(ToGrpc(chunk_.status));
    if (static_cast<int64_t>(stream_.size() + chunk_.message.data().size()) > kMaxMigrationBytes) {
      return Finish(ToGrpc(absl::ResourceExhaustedError(absl::StrCat(
          "the stream is larger than the migration limit of ", kMaxMigrationBytes >> 20, " MiB"))));
    }
    if (absl::Status st = lease_.Grow(static_cast<int64_t>(chunk_.message.data().size())); !st.ok()) {
      return Finish(ToGrpc(st));
    }
    const size_t before = stream_.size();
    stream_.append(chunk_.message.data());
    chunk_.message.Clear();
    if (before < 4 && stream_.size() >= 4 && std::string_view(stream_).substr(0, 4) != "KVSM") {
      return Finish(ToGrpc(absl::DataLossError("the stream is not a kvsession migration stream")));
    }
    StartRead(&chunk_);
  }
  void OnDone() override { delete this; }

 private:
  TaskExecutor* const io_;
  const ImportFn import_;
  MigrationMemory::Lease lease_;
  ParsedRequest<v1::ImportChunk> chunk_;
  std::string stream_;
};

}  // namespace

grpc::ServerReadReactor<ParsedRequest<v1::ImportChunk>>* KvSessionService::ImportSessionParsed(
    grpc::CallbackServerContext* ctx, v1::ImportSessionResponse* response) {
  const absl::StatusOr<Principal> caller = CallerOf(ctx);
  const Principal who = caller.ok() ? *caller : Principal{};
  const bool authenticated = caller.ok();
  // Taking 0 bytes never fails; the chunks grow it.
  absl::StatusOr<MigrationMemory::Lease> lease = migration_memory_->Take(MigrationTenant(authenticating(), caller), 0);
  return new ImportReader(
      io_, *std::move(lease), [this, ctx, who, authenticated, response](std::string bytes) -> absl::Status {
        if (ctx->IsCancelled()) return absl::CancelledError("the client cancelled the import");
        if (!authenticated) return absl::UnauthenticatedError("the caller's API key was removed");
        absl::StatusOr<MigrationContents> contents = DecodeMigrationStream(bytes);
        const int64_t stream_bytes = static_cast<int64_t>(bytes.size());
        bytes.clear();
        if (!contents.ok()) return contents.status();
        const SessionRecord& record = contents->record();
        absl::Status ids = CheckSessionId("the stream's session id", record.id());
        if (ids.ok() && contents->checkpoint) {
          ids = CheckCheckpointId("the stream's checkpoint id", contents->checkpoint->id());
        }
        if (!ids.ok()) return ids;
        const std::string owner = RecordOwner(record);
        if (!who.is_admin() && owner != who.tenant) {
          return absl::PermissionDeniedError(absl::StrCat("the stream holds a session of tenant ", Quote(owner),
                                                          "; only that tenant or an admin may import it"));
        }
        // A chain that starts from the shared prefix pool, or restarts from a
        // slide's salt, is one this server cannot check belongs to the owner
        // (the salt names dropped tokens; any 16 bytes pass, another tenant's
        // chain start too): from a tenant, its pages could land under another
        // tenant's hashes. Only admins import such streams.
        if (authenticating() && !who.is_admin() &&
            (record.shared_prefix_chain() || !record.slide_salt().empty())) {
          return absl::PermissionDeniedError(
              record.shared_prefix_chain()
                  ? "the stream's session chains from the shared prefix pool; only an admin may import it"
                  : "the stream's session slid past its context; only an admin may import it");
        }
        std::shared_ptr<TenantClaim> store_claim;  // held until the stream is written or refused
        if (tenant_usage_ != nullptr) {
          absl::StatusOr<std::shared_ptr<TenantClaim>> claim = tenant_usage_->ReserveImport(owner, stream_bytes);
          if (!claim.ok()) return claim.status();
          store_claim = *std::move(claim);
        }
        absl::StatusOr<ImportResult> done = sessions_->Import(*contents);
        store_claim.reset();
        if (!done.ok()) return done.status();
        response->set_session_id(done->session_id);
        response->set_checkpoint_id(done->checkpoint_id);
        response->set_pages_written(done->pages_written);
        response->set_pages_reused(done->pages_reused);
        response->set_bytes_written(done->bytes_written);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KvSessionService::FindMissingPages(grpc::CallbackServerContext* ctx,
                                                             const v1::FindMissingPagesRequest* request,
                                                             v1::FindMissingPagesResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::vector<PageHash> hashes;
  if (absl::Status st = ReadHashes("page_hashes", request->page_hashes(), &hashes); !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  // With API keys, whether a page is here would tell one tenant about
  // another's text: only admins get the real answer.
  const absl::StatusOr<Principal> caller = CallerOf(ctx);
  const bool honest = !authenticating() || (caller.ok() && caller->is_admin());
  for (const PageHash& h : hashes) {
    if (!honest || !sessions_->HasStoredPage(h)) response->add_missing_pages(std::string(h.view()));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kvs
