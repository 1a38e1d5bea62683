// CallAudit's pure parts: which methods are audited, and its JSON strings
// (parsed back with nlohmann::json). The log itself is tested against the
// real server in tests/audit_log_test.py.
#include "service/call_audit.h"

#include <google/protobuf/descriptor.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kvsession/v1/kvsession.grpc.pb.h"

namespace kvs {
namespace {

TEST(CallAuditTest, ExactlyTheMethodsThatChangeStateAreAudited) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          kvsession::v1::KvSession::service_full_name());
  ASSERT_NE(service, nullptr);
  std::set<std::string> audited;
  for (int i = 0; i < service->method_count(); ++i) {
    if (CallAudit::IsMutating(service->method(i)->name())) audited.insert(service->method(i)->name());
  }
  // A new RPC lands here (audited until the table says otherwise): decide.
  EXPECT_EQ(audited, (std::set<std::string>{"CreateSession", "Append", "Generate", "Fork", "Snapshot", "Restore",
                                            "DeleteSession", "DeleteCheckpoint", "Truncate",
                                            "ImportSession"}));
  EXPECT_TRUE(CallAudit::IsMutating("SomeFutureRpc"));
}

TEST(CallAuditTest, ACallToAPathThatIsNoMethodIsNamedUnknown) {
  EXPECT_EQ(CallAudit::MethodName("Generate"), "Generate");
  EXPECT_EQ(CallAudit::MethodName("ImportSession"), "ImportSession");
  EXPECT_EQ(CallAudit::MethodName(std::string(8192, 'x')), CallAudit::kUnknownMethod);
  EXPECT_EQ(CallAudit::MethodName("generate"), CallAudit::kUnknownMethod);
  EXPECT_EQ(CallAudit::MethodName(""), CallAudit::kUnknownMethod);
}

TEST(CallAuditTest, JsonStringsEscapeEverythingAndParseBackBounded) {
  const std::string hostile = std::string("ses_\"\\\n\t\x01", 9) + "\xff\xfe" + "</script>";
  const std::string json = CallAudit::JsonString(hostile);
  const nlohmann::json parsed = nlohmann::json::parse(json);
  ASSERT_TRUE(parsed.is_string());
  EXPECT_EQ(parsed.get<std::string>().substr(0, 9), hostile.substr(0, 9));
  for (char c : json) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << static_cast<int>(c);
  const std::string long_id(1000, 'a');
  EXPECT_EQ(nlohmann::json::parse(CallAudit::JsonString(long_id)).get<std::string>(), std::string(64, 'a'));
}

}  // namespace
}  // namespace kvs
