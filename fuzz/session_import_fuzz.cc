// libFuzzer target: a session record a client imports (ImportSession), then
// every call a client may make on what was imported. A real KvSessionService
// serves in this process (fuzz/fuzz_server.h).
//
// A fuzzer cannot forge a migration stream's checksums, so the input is the
// record and the harness frames it (cache/migration_stream.h), with pages:
//
//   byte 0:  control bits
//              0 clear: the record gets this server's model fingerprint and
//                       KV geometry (set: its own, as mutated)
//              1 clear: a new session id (set: its own)
//              2 clear: page_hashes recomputed from its tokens
//                       (FillPageHashes: the chain the store checks)
//              3 set:   the pages' KV bytes are 0xFF (NaN in f16), else a
//                       fixed pattern of small values
//              4-5:     who imports a session of whom (the server has API
//                       keys and tenants, fuzz/fuzz_server.h): 0 an admin
//                       imports the default tenant's, 1 tenant acme its
//                       own, 2 acme beta's (any refusal is right, OK a
//                       finding), 3 an admin acme's; every later call is
//                       the importer's
//              6 set:   the stream holds a checkpoint of the record (its
//                       session record), which is then restored, and the
//                       restored session used
//   rest:    a kvs.SessionRecord, protobuf bytes
//
// Every page the record names is in the stream when the record has this
// server's geometry (encoded by EncodePage), so the import reaches past the
// page checks to the record's own fields: token ids, lengths, sampling,
// chat and context-overflow state, and past the tenant checks to the
// quotas (acme's are small). The seed corpus (fuzz/corpus/session_import/,
// make_seed_corpus) holds a plain session, a chat with an open turn, a
// slid session and one with sampling defaults, imported by an admin; a
// plain session and a chat imported by acme, the plain one of acme's by an
// admin and of beta's by acme, and both as checkpoints.
//
// Findings (__builtin_trap), besides crashes and sanitizer reports: the
// import or any later call ending with a status no client can act on
// (fuzz/fuzz_server.h Actionable; for the import DATA_LOSS is the answer to a
// damaged stream, ALREADY_EXISTS to a repeat, and, to a tenant,
// PERMISSION_DENIED to another tenant's session or a chain only an admin may
// bring), a message over 1024 bytes, or a protobuf log line about invalid
// UTF-8 (fuzz/protobuf_utf8_log.h: records whose strings are not UTF-8 are
// skipped, fuzz/migration_stream_fuzz.cc reaches the server's reader with
// them). After an import that answered OK, DATA_LOSS is a finding too (the
// server accepted what it cannot read back), and so is INVALID_ARGUMENT for
// the first Generate of an ERROR-policy session, which sends nothing but
// max_tokens: what the import stored must be usable as it is (a SLIDE
// session's kept tokens may leave no page to drop on this server's smaller
// context: INVALID_ARGUMENT is its answer), and an import of another tenant's
// session that answers OK. Calls stop once an input has taken 15 s, and none
// is given longer than the input has left of 25 (libFuzzer's -timeout is 30).
// KVS_FUZZ_VERBOSE=1 prints each call's status.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/migration_stream.h"
#include "cache/page_codec.h"
#include "cache/record_codec.h"
#include "cache/record_validation.h"
#include "cache/session_record.pb.h"
#include "fuzz/fuzz_server.h"
#include "fuzz/protobuf_utf8_log.h"
#include "kvsession/v1/kvsession.grpc.pb.h"

namespace {

namespace v1 = kvsession::v1;

constexpr char kTarget[] = "session_import_fuzz";
constexpr size_t kMaxMessageBytes = 1024;
constexpr int kMaxLiveSessions = 16;

[[noreturn]] void Fail(const std::string& what) { kvs::fuzz::Fail(kTarget, what); }

kvs::fuzz::FuzzServer* Server() {
  static kvs::fuzz::FuzzServer* server =
      kvs::fuzz::StartFuzzServer(kTarget, 4 * kMaxLiveSessions, /*with_tenants=*/true);
  return server;
}

// Who imports whose session (control bits 4-5).
struct Parties {
  const char* caller_key;
  const char* owner;  // the record's owner; "" is the default tenant
  bool foreign;       // the owner is another tenant than the caller's
};
Parties PartiesOf(uint8_t control) {
  switch ((control >> 4) & 3) {
    case 1:
      return {kvs::fuzz::kAcmeKey, "acme", false};
    case 2:
      return {kvs::fuzz::kAcmeKey, "beta", true};
    case 3:
      return {kvs::fuzz::kAdminKey, "acme", false};
    default:
      return {kvs::fuzz::kAdminKey, "", false};
  }
}

// This input's caller and when it started.
const char* g_caller_key = kvs::fuzz::kAdminKey;
bool g_caller_is_admin = true;
std::chrono::steady_clock::time_point g_input_start;

// Whether the input has time for another call.
bool TimeLeft() { return std::chrono::steady_clock::now() - g_input_start < std::chrono::seconds(15); }

// A call's deadline, at most what the input has left of 25 s (a hang is a
// finding: DEADLINE_EXCEEDED is not actionable), and its caller's key.
void Prepare(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    (g_input_start + std::chrono::seconds(25) - std::chrono::steady_clock::now()));
  ctx->AddMetadata("authorization", std::string("Bearer ") + g_caller_key);
}

// Checks one call's status; `imported`: the session was imported OK, so
// DATA_LOSS is the server contradicting itself.
void Check(const char* call, const grpc::Status& st, bool imported) {
  static const bool verbose = std::getenv("KVS_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "%s: code %d: %s\n", call, st.error_code(), st.error_message().substr(0, 200).c_str());
  }
  const bool import_answer =
      !imported && (st.error_code() == grpc::StatusCode::DATA_LOSS ||
                    st.error_code() == grpc::StatusCode::ALREADY_EXISTS ||
                    (st.error_code() == grpc::StatusCode::PERMISSION_DENIED && !g_caller_is_admin));
  if ((!kvs::fuzz::Actionable(st.error_code()) && !import_answer) ||
      st.error_message().size() > kMaxMessageBytes) {
    Fail(absl::StrCat(call, " answered code ", st.error_code(), " with a message of ", st.error_message().size(),
                      " bytes: ", st.error_message().substr(0, 300)));
  }
}

// The record, adjusted as the control byte says; false when the bytes are
// not a record.
bool ReadRecord(uint8_t control, const uint8_t* data, size_t size, kvs::SessionRecord* record) {
  // The store's own parse: a record of invalid UTF-8 (which a SessionRecord
  // cannot hold) is skipped before protobuf's parser would log it.
  if (!kvs::ParseRecord(std::string_view(reinterpret_cast<const char*>(data), size), record).ok()) return false;
  const kvs::fuzz::FuzzServer& s = *Server();
  if ((control & 1) == 0) {
    record->set_model_fingerprint(s.fingerprint);
    *record->mutable_geometry() = kvs::ToGeometryRecord(s.geometry);
  }
  if ((control & 2) == 0) {
    static uint64_t next = 0;
    record->set_id(absl::StrFormat("ses_%032x", ++next));
  }
  // The owner before the hashes: each tenant's chain starts from its name.
  record->set_owner(PartiesOf(control).owner);
  if ((control & 4) == 0) (void)kvs::FillPageHashes(record);  // a bad shape keeps its hashes
  return true;
}

// The stream of `record` (or of a checkpoint of it) with every page it
// names, when its geometry is the server's (others are refused before any
// page is read).
std::string Frame(const kvs::SessionRecord& record, bool nan_pages, bool as_checkpoint) {
  const kvs::fuzz::FuzzServer& s = *Server();
  kvs::MigrationStreamWriter writer;
  if (as_checkpoint) {
    static uint64_t next = 0;
    kvs::CheckpointRecord checkpoint;
    checkpoint.set_id(absl::StrFormat("ckpt_%032x", ++next));
    checkpoint.set_name("fuzz");
    checkpoint.set_create_time_us(record.update_time_us());
    *checkpoint.mutable_session() = record;
    writer.SetCheckpoint(checkpoint);
  } else {
    writer.SetSession(record);
  }
  absl::StatusOr<kvs::KvGeometry> g = kvs::FromGeometryRecord(record.geometry());
  const kvs::KvGeometry& ours = s.geometry;
  if (g.ok() && g->n_layers == ours.n_layers && g->n_kv_heads == ours.n_kv_heads && g->head_dim == ours.head_dim &&
      g->page_tokens == ours.page_tokens && g->dtype == ours.dtype) {
    std::vector<uint8_t> page(ours.page_bytes());
    for (size_t i = 0; i < page.size(); ++i) page[i] = nan_pages ? 0xFF : static_cast<uint8_t>(i % 2 ? 0x2C : i % 97);
    const int kv_length = std::max(0, record.kv_length());
    for (int i = 0; i < record.page_hashes_size(); ++i) {
      const std::optional<kvs::PageHash> hash = kvs::PageHash::FromBytes(record.page_hashes(i));
      if (!hash) continue;
      const int n_tokens = std::clamp(kv_length - i * ours.page_tokens, 1, ours.page_tokens);
      writer.AddPage(*hash, kvs::EncodePage(ours, page.data(), n_tokens));
    }
  }
  return std::move(writer).Finish();
}

// ImportSession of `stream` in chunks of 64 KiB: its answer.
grpc::Status Import(const std::string& stream, v1::ImportSessionResponse* response) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  std::unique_ptr<grpc::ClientWriter<v1::ImportChunk>> writer = Server()->stub->ImportSession(&ctx, response);
  for (size_t at = 0; at < stream.size(); at += 65536) {
    v1::ImportChunk chunk;
    chunk.set_data(stream.substr(at, 65536));
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  const grpc::Status st = writer->Finish();
  Check("ImportSession", st, /*imported=*/false);
  return st;
}

// Restore of an imported checkpoint: the new session's id, or "".
std::string Restore(const std::string& checkpoint_id) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::RestoreRequest req;
  req.set_checkpoint_id(checkpoint_id);
  v1::Session session;
  const grpc::Status st = Server()->stub->Restore(&ctx, req, &session);
  Check("Restore", st, true);
  return st.ok() ? session.id() : std::string();
}

// Every call a client may make on the imported session `id`, in the order
// a conversation would, while the input has time left.
void Use(const std::string& id, bool slides) {
  v1::KvSession::Stub& stub = *Server()->stub;
  v1::Session session;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::GetSessionRequest req;
    req.set_session_id(id);
    req.set_include_token_ids(true);
    req.set_include_text(true);
    Check("GetSession", stub.GetSession(&ctx, req, &session), true);
  }
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::GenerateRequest req;
    req.set_session_id(id);
    req.set_max_tokens(3);
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub.Generate(&ctx, req);
    v1::GenerateResponse message;
    while (reader->Read(&message)) {
    }
    const grpc::Status st = reader->Finish();
    Check("Generate", st, true);
    if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT && !slides) {
      Fail("the imported session's first Generate (max_tokens only) is INVALID_ARGUMENT: " +
           st.error_message().substr(0, 300));
    }
  }
  if (!TimeLeft()) return;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::AppendRequest req;
    req.set_session_id(id);
    req.mutable_input()->set_text(" and then");
    v1::AppendResponse response;
    Check("Append", stub.Append(&ctx, req, &response), true);
  }
  if (!TimeLeft()) return;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::ForkRequest req;
    req.set_session_id(id);
    req.set_count(2);
    v1::ForkResponse response;
    Check("Fork", stub.Fork(&ctx, req, &response), true);
  }
  if (!TimeLeft()) return;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::TruncateRequest req;
    req.set_session_id(id);
    req.set_length(std::max(1, session.length() / 2));
    v1::TruncateResponse response;
    Check("Truncate", stub.Truncate(&ctx, req, &response), true);
  }
  if (!TimeLeft()) return;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::SnapshotRequest req;
    req.set_session_id(id);
    v1::Checkpoint checkpoint;
    Check("Snapshot", stub.Snapshot(&ctx, req, &checkpoint), true);
  }
  if (!TimeLeft()) return;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::ExportSessionRequest req;
    req.set_session_id(id);
    std::unique_ptr<grpc::ClientReader<v1::ExportChunk>> reader = stub.ExportSession(&ctx, req);
    v1::ExportChunk chunk;
    while (reader->Read(&chunk)) {
    }
    Check("ExportSession", reader->Finish(), true);
  }
  if (!TimeLeft()) return;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::DeleteSessionRequest req;
    req.set_session_id(id);
    v1::DeleteSessionResponse response;
    Check("DeleteSession", stub.DeleteSession(&ctx, req, &response), true);
  }
}

// Keeps the number of sessions and checkpoints bounded (imports may
// repeat an id, forks and snapshots add more): past kMaxLiveSessions, all
// go. And keeps acme below its quotas most of the time, so its imports
// reach past them: near one, acme's own go (other tenants' stay, so the
// store keeps pages and records of several tenants at once).
void Tidy() {
  kvs::SessionManager& sessions = *Server()->sessions;
  const std::string acme_owner = "acme";
  const kvs::TenantUsageFigures acme = Server()->tenant_usage->Usage(acme_owner);
  const bool acme_near_a_quota = acme.sessions >= 10 || acme.checkpoints >= 5 || acme.store_bytes >= 48 * 1024;
  const std::string* whose = nullptr;  // everyone's
  if (sessions.session_count() <= kMaxLiveSessions && acme_near_a_quota) whose = &acme_owner;
  if (sessions.session_count() > kMaxLiveSessions || acme_near_a_quota) {
    for (const kvs::SessionInfo& info : sessions.List("", 10000, whose)) {
      (void)sessions.Delete(info.id, absl::Now() + absl::Seconds(5));
    }
  }
  const std::vector<kvs::CheckpointRecord> all_checkpoints = sessions.ListCheckpoints("", "", 10000);
  if (all_checkpoints.size() > kMaxLiveSessions) {
    for (const kvs::CheckpointRecord& c : all_checkpoints) (void)sessions.DeleteCheckpoint(c.id());
  } else if (acme_near_a_quota) {
    for (const kvs::CheckpointRecord& c : sessions.ListCheckpoints("", "", 10000, &acme_owner)) {
      (void)sessions.DeleteCheckpoint(c.id());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool trap_utf8_log = (kvs::fuzz::TrapOnProtobufUtf8Log("session_import_fuzz"), true);
  (void)trap_utf8_log;
  if (size == 0) return 0;
  kvs::SessionRecord record;
  if (!ReadRecord(data[0], data + 1, size - 1, &record)) return 0;
  Tidy();
  const Parties parties = PartiesOf(data[0]);
  g_caller_key = parties.caller_key;
  g_caller_is_admin = parties.caller_key == kvs::fuzz::kAdminKey;
  g_input_start = std::chrono::steady_clock::now();
  const bool as_checkpoint = (data[0] & 64) != 0;
  v1::ImportSessionResponse imported;
  const grpc::Status st = Import(Frame(record, (data[0] & 8) != 0, as_checkpoint), &imported);
  if (parties.foreign && st.ok()) Fail("a tenant imported another tenant's session");
  if (!st.ok()) return 0;
  const std::string id = as_checkpoint ? Restore(imported.checkpoint_id()) : imported.session_id();
  if (!id.empty()) Use(id, record.context_policy() != 0);
  return 0;
}
