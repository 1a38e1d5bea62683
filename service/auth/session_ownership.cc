#include "service/auth/session_ownership.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/str_cat.h"
#include "kvsession/v1/kvsession.pb.h"
#include "service/request_checks.h"

namespace kvs {
namespace {

// The value of string field `name` of `request` when set, or "".
std::string StringField(const google::protobuf::Message& request, const char* name) {
  const google::protobuf::FieldDescriptor* f = request.GetDescriptor()->FindFieldByName(name);
  if (f == nullptr || f->type() != google::protobuf::FieldDescriptor::TYPE_STRING || f->is_repeated()) return "";
  const google::protobuf::Reflection* r = request.GetReflection();
  if (f->has_presence() && !r->HasField(request, f)) return "";
  return r->GetString(request, f);
}

}  // namespace

absl::Status SessionOwnership::Check(const Principal& caller, const google::protobuf::Message& request) const {
  if (caller.is_admin()) return absl::OkStatus();
  if (request.GetDescriptor() == kvsession::v1::ListCheckpointsRequest::descriptor()) return absl::OkStatus();
  // Missing and foreign ids alike: the same lookup, the same message.
  if (const std::string id = StringField(request, "session_id"); IsSessionId(id)) {
    if (!sessions_->SessionVisibleTo(id, caller.tenant)) {
      return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
    }
  }
  if (const std::string id = StringField(request, "checkpoint_id"); IsCheckpointId(id)) {
    if (!sessions_->CheckpointVisibleTo(id, caller.tenant)) {
      return absl::NotFoundError(absl::StrCat("no checkpoint '", id, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvs

// Sessions of the default tenant chain their page hashes from zeros, as
// every session did before tenants (cache/page_hash.h).
static_assert(std::string_view(kvs::kDefaultTenant) == std::string_view(kvs::kUnsaltedTenant));
