#include "service/call_audit.h"

#include <fcntl.h>

#include <chrono>
#include <optional>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kvsession/v1/kvsession.grpc.pb.h"
#include "service/auth/call_auth.h"
#include "service/grpc_status.h"
#include "service/request_parser.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using grpc::experimental::InterceptionHookPoints;
using google::protobuf::Message;

// A received message (gRPC's void*) as the request it holds; a sent one as
// the response.
using RequestOf = const Message* (*)(void*);
using ResponseOf = const Message* (*)(const void*);
template <class Request>
const Message* ParsedMessage(void* p) {
  return &static_cast<ParsedRequest<Request>*>(p)->message;
}
template <class Response>
const Message* SentMessage(const void* p) {
  return static_cast<const Response*>(p);
}

struct AuditedMethod {
  const char* name;
  bool mutating;
  RequestOf request;    // null when not mutating (not read)
  ResponseOf response;  // null when not mutating
};

// Every method of kvsession.v1.KvSession: mutating (audited) or not. An
// RPC added later and missing here is audited (without ids or tokens).
constexpr AuditedMethod kAuditedMethods[] = {
    {"CreateSession", true, ParsedMessage<v1::CreateSessionRequest>, SentMessage<v1::Session>},
    {"Append", true, ParsedMessage<v1::AppendRequest>, SentMessage<v1::AppendResponse>},
    {"Generate", true, ParsedMessage<v1::GenerateRequest>, SentMessage<v1::GenerateResponse>},
    {"Fork", true, ParsedMessage<v1::ForkRequest>, SentMessage<v1::ForkResponse>},
    {"Snapshot", true, ParsedMessage<v1::SnapshotRequest>, SentMessage<v1::Checkpoint>},
    {"Restore", true, ParsedMessage<v1::RestoreRequest>, SentMessage<v1::Session>},
    {"DeleteSession", true, ParsedMessage<v1::DeleteSessionRequest>, SentMessage<v1::DeleteSessionResponse>},
    {"DeleteCheckpoint", true, ParsedMessage<v1::DeleteCheckpointRequest>,
     SentMessage<v1::DeleteCheckpointResponse>},
    {"Truncate", true, ParsedMessage<v1::TruncateRequest>, SentMessage<v1::TruncateResponse>},
    {"GetSession", false, nullptr, nullptr},
    {"ListSessions", false, nullptr, nullptr},
    {"ListCheckpoints", false, nullptr, nullptr},
    {"GetServerInfo", false, nullptr, nullptr},
    {"Tokenize", false, nullptr, nullptr},
    {"Detokenize", false, nullptr, nullptr},
    // Migration: an import writes a session (or checkpoint) into the store,
    // named by its response (its request is a byte stream); an export and
    // a page inventory only read.
    {"ImportSession", true, nullptr, SentMessage<v1::ImportSessionResponse>},
    {"ExportSession", false, nullptr, nullptr},
    {"FindMissingPages", false, nullptr, nullptr},
};

const AuditedMethod* FindMethod(std::string_view name) {
  for (const AuditedMethod& m : kAuditedMethods) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

// The value of string field `name` of `m` when set, or "".
std::string StringField(const Message& m, const char* name) {
  const google::protobuf::FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(name);
  if (f == nullptr || f->type() != google::protobuf::FieldDescriptor::TYPE_STRING || f->is_repeated()) return "";
  const google::protobuf::Reflection* r = m.GetReflection();
  if (f->has_presence() && !r->HasField(m, f)) return "";
  return r->GetString(m, f);
}

}  // namespace

struct CallAudit::Call {
  std::string method;
  bool mutating = true;
  absl::StatusOr<Principal> caller;
  std::string session_id, checkpoint_id;
  std::vector<std::string> created;
  std::optional<v1::Usage> usage;
  std::optional<int> session_tokens;  // the session's length after the call
  int code = 0;
  double latency_ms = 0;
};

namespace {

// Reads what the audit line needs from a response (ids it created, usage).
void ReadResponse(const Message& m, CallAudit::Call* call) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  if (d == v1::Session::descriptor() || d == v1::Checkpoint::descriptor()) {
    call->created.push_back(StringField(m, "id"));
  }
  if (d == v1::ImportSessionResponse::descriptor()) {
    for (const char* field : {"session_id", "checkpoint_id"}) {
      if (std::string id = StringField(m, field); !id.empty()) call->created.push_back(std::move(id));
    }
  }
  if (d == v1::Session::descriptor()) call->session_tokens = static_cast<const v1::Session&>(m).length();
  const google::protobuf::Reflection* r = m.GetReflection();
  if (const auto* f = d->FindFieldByName("session");
      f != nullptr && !f->is_repeated() && f->message_type() == v1::Session::descriptor() && r->HasField(m, f)) {
    call->session_tokens = static_cast<const v1::Session&>(r->GetMessage(m, f)).length();
  }
  if (const auto* f = d->FindFieldByName("sessions");
      f != nullptr && f->is_repeated() && f->message_type() == v1::Session::descriptor()) {
    for (int i = 0; i < r->FieldSize(m, f); ++i) {
      call->created.push_back(StringField(r->GetRepeatedMessage(m, f, i), "id"));
    }
  }
  if (const auto* f = d->FindFieldByName("usage");
      f != nullptr && !f->is_repeated() && f->message_type() == v1::Usage::descriptor() && r->HasField(m, f)) {
    v1::Usage usage;
    usage.CopyFrom(r->GetMessage(m, f));
    call->usage = usage;
  }
}

class AuditInterceptor : public grpc::experimental::Interceptor {
 public:
  AuditInterceptor(CallAudit* audit, const Authenticator* authenticator, grpc::experimental::ServerRpcInfo* info,
                   std::string method, const AuditedMethod* entry)
      : audit_(audit), authenticator_(authenticator), info_(info), entry_(entry) {
    call_.method = std::move(method);
    call_.mutating = entry == nullptr || entry->mutating;
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // Who the call is, from its metadata as it arrives, as its handler
    // authenticates it: a key removed by a reload (SIGHUP) while the call
    // runs does not change whom its line names.
    if (!authenticated_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      Authenticate();
    }
    if (entry_ != nullptr && entry_->request != nullptr &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (void* m = methods->GetRecvMessage(); m != nullptr) {
        const Message* request = entry_->request(m);
        call_.session_id = StringField(*request, "session_id");
        call_.checkpoint_id = StringField(*request, "checkpoint_id");
      }
    }
    if (entry_ != nullptr && entry_->response != nullptr &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (const void* m = methods->GetSendMessage(); m != nullptr) ReadResponse(*entry_->response(m), &call_);
    }
    if (!recorded_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      recorded_ = true;
      call_.code = static_cast<int>(methods->GetSendStatus().error_code());
      call_.latency_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
      if (!authenticated_) Authenticate();
      // Restore{session_id} loads an existing session: it creates nothing.
      if (call_.method == "Restore" && call_.checkpoint_id.empty()) call_.created.clear();
      audit_->Record(call_);
    }
    methods->Proceed();
  }

 private:
  CallAudit* const audit_;
  const Authenticator* const authenticator_;
  grpc::experimental::ServerRpcInfo* const info_;
  const AuditedMethod* const entry_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  CallAudit::Call call_;
  void Authenticate() {
    authenticated_ = true;
    call_.caller = AuthenticateCall(authenticator_, *info_->server_context());
    // A refused x-kvsession-tenant: the line names the key's own tenant.
    if (absl::IsPermissionDenied(call_.caller.status()) || absl::IsInvalidArgument(call_.caller.status())) {
      call_.caller = AuthenticateKey(authenticator_, *info_->server_context());
    }
  }

  bool authenticated_ = false;
  bool recorded_ = false;
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  Factory(CallAudit* audit, const Authenticator* authenticator) : audit_(audit), authenticator_(authenticator) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    static const std::string prefix = absl::StrCat("/", v1::KvSession::service_full_name(), "/");
    const std::string_view full = info->method() == nullptr ? "" : info->method();
    if (full.substr(0, prefix.size()) != prefix) return nullptr;  // health, reflection
    return new AuditInterceptor(audit_, authenticator_, info, CallAudit::MethodName(full.substr(prefix.size())),
                                FindMethod(full.substr(prefix.size())));
  }

 private:
  CallAudit* const audit_;
  const Authenticator* const authenticator_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CallAudit>> CallAudit::Create(const std::string& log_path,
                                                             const Authenticator* authenticator,
                                                             metrics::Registry* tenant_metrics) {
  std::FILE* out = nullptr;
  bool owned = false;
  if (log_path == "-") {
    out = stderr;
  } else if (!log_path.empty()) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    out = fd < 0 ? nullptr : ::fdopen(fd, "a");
    if (out == nullptr) {
      if (fd >= 0) ::close(fd);
      return absl::FailedPreconditionError(absl::StrCat("--audit-log: cannot open ", log_path, " for appending"));
    }
    owned = true;
  }
  return std::unique_ptr<CallAudit>(new CallAudit(out, owned, authenticator, tenant_metrics));
}

CallAudit::CallAudit(std::FILE* out, bool owned, const Authenticator* authenticator, metrics::Registry* registry)
    : out_(out), owned_(owned), authenticator_(authenticator), registry_(registry) {}

CallAudit::~CallAudit() {
  if (owned_) std::fclose(out_);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> CallAudit::InterceptorFactory() {
  return std::make_unique<Factory>(this, authenticator_);
}

std::string CallAudit::MethodName(std::string_view method) {
  static const google::protobuf::ServiceDescriptor* const service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(v1::KvSession::service_full_name());
  if (service != nullptr && service->FindMethodByName(std::string(method)) != nullptr) return std::string(method);
  return kUnknownMethod;
}

bool CallAudit::IsMutating(std::string_view method) {
  const AuditedMethod* m = FindMethod(method);
  return m == nullptr || m->mutating;
}

std::string CallAudit::JsonString(std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) s = s.substr(0, max_bytes);
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      // Control characters and every non-ASCII byte (the input need not be
      // UTF-8): \u00XX, so the line is always valid JSON.
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += ch;
    }
  }
  out += '"';
  return out;
}

void CallAudit::Record(const Call& call) {
  const std::string code = GrpcCodeName(call.code);
  if (registry_ != nullptr) {
    const std::string tenant = call.caller.ok() ? call.caller->tenant : "(unauthenticated)";
    registry_
        ->AddCounter("kvsession_tenant_requests_total", "Calls by tenant, method and final gRPC status code.",
                     {{"tenant", tenant}, {"method", call.method}, {"code", code}})
        ->Add();
  }
  if (out_ == nullptr || !call.mutating) return;
  std::string line = absl::StrCat(
      "{\"time\":\"", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      "\",\"tenant\":", call.caller.ok() ? JsonString(call.caller->tenant) : "null");
  if (call.caller.ok() && !call.caller->acting_admin.empty()) {
    absl::StrAppend(&line, ",\"acting_admin\":", JsonString(call.caller->acting_admin));
  }
  absl::StrAppend(&line, ",\"method\":", JsonString(call.method));
  if (!call.session_id.empty()) absl::StrAppend(&line, ",\"session_id\":", JsonString(call.session_id));
  if (!call.checkpoint_id.empty()) absl::StrAppend(&line, ",\"checkpoint_id\":", JsonString(call.checkpoint_id));
  if (!call.created.empty()) {
    absl::StrAppend(&line, ",\"created\":[");
    for (size_t i = 0; i < call.created.size(); ++i) {
      absl::StrAppend(&line, i > 0 ? "," : "", JsonString(call.created[i]));
    }
    absl::StrAppend(&line, "]");
  }
  absl::StrAppend(&line, ",\"code\":\"", code, "\"");
  if (call.usage) {
    absl::StrAppend(&line, ",\"prompt_tokens\":", call.usage->prompt_tokens(),
                    ",\"cached_tokens\":", call.usage->cached_tokens(),
                    ",\"generated_tokens\":", call.usage->generated_tokens());
  }
  if (call.session_tokens) absl::StrAppend(&line, ",\"session_tokens\":", *call.session_tokens);
  absl::StrAppend(&line, ",\"latency_ms\":", absl::StrFormat("%.3f", call.latency_ms), "}\n");
  absl::MutexLock lock(&mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace kvs
