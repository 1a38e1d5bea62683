// libFuzzer target: request handling of arbitrary messages. A real
// KvSessionService (real engine, RocksDB store in a temporary directory, a
// tiny synthesized model) serves in this process on a loopback port; each
// input is one call through grpc::GenericStub:
//
//   byte 0:  bits 0-6 pick the method (modulo the service's method count);
//            bit 7 set: the call carries no request message at all
//   rest:    the request message's bytes, as they are
//
// To reach past the id checks, the 36-byte placeholders
// "ses_SSSS...S" (32 'S') and "ckpt_CCC...C" (32 'C') are replaced by the
// ids of a live session and checkpoint of the same length (so the framing
// stays intact); the seed corpus (fuzz/corpus/service_requests/) holds a
// valid request of every method with them.
//
// A call must end, within its deadline, with a status a client can act on:
// OK, INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, OUT_OF_RANGE,
// RESOURCE_EXHAUSTED or ABORTED, and a message of at most 1024 bytes (no
// unbounded echo of the input). UNKNOWN, INTERNAL, UNIMPLEMENTED, DATA_LOSS,
// UNAVAILABLE, DEADLINE_EXCEEDED (a hang) or anything else is a finding
// (__builtin_trap), as is a crash, a sanitizer report, or protobuf's parser
// meeting invalid UTF-8 the service's own walk did not refuse first. KVS_FUZZ_VERBOSE=1
// prints each call's method and status.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "fuzz/fuzz_server.h"
#include "fuzz/protobuf_utf8_log.h"
#include "kvsession/v1/kvsession.grpc.pb.h"
#include "tests/raw_call.h"

namespace {

namespace v1 = kvsession::v1;

const std::string kSessionMarker = "ses_" + std::string(32, 'S');
const std::string kCheckpointMarker = "ckpt_" + std::string(32, 'C');
constexpr size_t kMaxMessageBytes = 1024;
constexpr int kMaxLiveSessions = 24;

[[noreturn]] void Fail(const std::string& what) { kvs::fuzz::Fail("service_requests_fuzz", what); }

// The in-process server (fuzz/fuzz_server.h) and the placeholders' targets.
struct Server {
  kvs::fuzz::FuzzServer* fuzz = nullptr;
  kvs::SessionManager* sessions = nullptr;
  v1::KvSession::Stub* stub = nullptr;
  std::shared_ptr<grpc::Channel> channel;
  const google::protobuf::ServiceDescriptor* methods = nullptr;
  std::string session_id;     // the live session the placeholder names
  std::string checkpoint_id;  // the live checkpoint the placeholder names
};

Server* Start() {
  kvs::fuzz::TrapOnProtobufUtf8Log("service_requests_fuzz");  // the walk refuses first
  auto* s = new Server;
  s->fuzz = kvs::fuzz::StartFuzzServer("service_requests_fuzz", 4 * kMaxLiveSessions);
  s->sessions = s->fuzz->sessions.get();
  s->stub = s->fuzz->stub.get();
  s->channel = s->fuzz->channel;
  s->methods = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      v1::KvSession::service_full_name());
  return s;
}

// Keeps the placeholder's session and checkpoint alive and the number of
// sessions and checkpoints bounded (inputs create, fork and delete them).
void Tidy(Server* s) {
  grpc::ClientContext get_ctx;
  v1::GetSessionRequest get;
  get.set_session_id(s->session_id);
  v1::Session session;
  if (s->session_id.empty() || !s->stub->GetSession(&get_ctx, get, &session).ok()) {
    grpc::ClientContext ctx;
    v1::CreateSessionRequest create;
    create.mutable_input()->set_text("Once upon a time");
    if (grpc::Status st = s->stub->CreateSession(&ctx, create, &session); !st.ok()) {
      Fail("cannot create the placeholder session: " + st.error_message());
    }
    s->session_id = session.id();
  }
  if (s->sessions->session_count() > kMaxLiveSessions) {
    for (const kvs::SessionInfo& info : s->sessions->List("", 10000)) {
      if (info.id != s->session_id) (void)s->sessions->Delete(info.id, absl::Now() + absl::Seconds(5));
    }
  }
  std::vector<kvs::CheckpointRecord> checkpoints = s->sessions->ListCheckpoints("", "", 10000);
  bool have = false;
  for (const kvs::CheckpointRecord& c : checkpoints) {
    if (c.id() == s->checkpoint_id) {
      have = true;
    } else if (checkpoints.size() > kMaxLiveSessions) {
      (void)s->sessions->DeleteCheckpoint(c.id());
    }
  }
  if (!have) {
    grpc::ClientContext ctx;
    v1::SnapshotRequest snap;
    snap.set_session_id(s->session_id);
    v1::Checkpoint checkpoint;
    if (grpc::Status st = s->stub->Snapshot(&ctx, snap, &checkpoint); !st.ok()) {
      Fail("cannot snapshot the placeholder session: " + st.error_message());
    }
    s->checkpoint_id = checkpoint.id();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server* server = Start();
  if (size == 0) return 0;
  Tidy(server);
  const google::protobuf::MethodDescriptor* method =
      server->methods->method((data[0] & 0x7f) % server->methods->method_count());
  const bool no_message = (data[0] & 0x80) != 0;
  const std::string request = absl::StrReplaceAll(
      std::string(reinterpret_cast<const char*>(data) + 1, size - 1),
      {{kSessionMarker, server->session_id}, {kCheckpointMarker, server->checkpoint_id}});
  std::vector<std::string> requests;
  if (!no_message) requests.push_back(request);
  const kvs::RawReply reply = kvs::RawCall(server->channel, kvs::KvSessionMethod(method->name()), requests,
                                           std::chrono::seconds(20));
  const grpc::StatusCode code = reply.status.error_code();
  static const bool verbose = std::getenv("KVS_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "%s: code %d, %zu messages: %s\n", method->name().c_str(), code, reply.messages.size(),
                 reply.status.error_message().substr(0, 200).c_str());
  }
  // An ImportSession stream is client bytes: DATA_LOSS is its answer for a
  // damaged one (nothing stored is damaged), ALREADY_EXISTS for a repeat.
  const bool import_answer = method->name() == "ImportSession" &&
                             (code == grpc::StatusCode::DATA_LOSS || code == grpc::StatusCode::ALREADY_EXISTS);
  if ((!kvs::fuzz::Actionable(code) && !import_answer) || reply.status.error_message().size() > kMaxMessageBytes) {
    Fail(absl::StrCat(method->name(), " answered code ", code, " with a message of ",
                      reply.status.error_message().size(), " bytes: ",
                      reply.status.error_message().substr(0, 300)));
  }
  if (code == grpc::StatusCode::OK && reply.messages.empty()) Fail(method->name() + " answered OK without a message");
  return 0;
}
