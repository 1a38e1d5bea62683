// kvs-load (tools/load) run as CI runs it: its short crash mode against the
// real kvsessiond, on the tiny trained model, with tenants over TLS, and
// with chat messages on a model with the real Qwen3 vocabulary and chat
// template.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/qwen3_chat_model.h"
#include "tests/reference_data.h"
#include "tests/scratch_dir.h"
#include "tests/subprocess.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

class LoadToolTest : public ::testing::Test {
 protected:
  ProcessResult KvsLoad(std::vector<std::string> args) {
    args.insert(args.begin(), BinaryPath("kvs-load"));
    return RunProcess(args, tmp_.string());
  }
  static std::string Model() { return SharedDir() + "/models/aidreams260K.gguf"; }

  ScratchDir scratch_{"load_test"};
  const std::filesystem::path tmp_ = scratch_.path();
};

// 16 clients for 20 s, 3 kills -9 at random moments (plus the final check),
// the data directory dropped from the page cache every 5 s and before each
// restart (so restores and restarts read from the disk, the store's direct
// reads included): every acknowledged call must be found after each
// restart, and no error may fall outside what the API allows under this load.
// --strict-busy: "busy" for an idle session (Fork/Snapshot are readers)
// or right after a cancel (the next call waits for the cancelled job) is
// a defect (issue 8 items 2-3).
TEST_F(LoadToolTest, AShortCrashRunLosesNoAcknowledgedCallAndHasNoUnexpectedError) {
  if (!std::filesystem::exists(Model())) GTEST_SKIP() << "../shared/models not present";
  const std::string summary = (tmp_ / "summary.json").string();
  ProcessResult r = KvsLoad({"--model", Model(), "--clients", "16", "--duration", "20s",
                             "--kills", "3", "--seed", "1", "--work-dir", (tmp_ / "work").string(),
                             "--summary-json", summary, "--strict-busy", "--drop-page-cache", "5s"});
  std::printf("%s", r.out.c_str());
  ASSERT_TRUE(std::filesystem::exists(summary)) << r.err;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(summary));
  EXPECT_EQ(s["fatal"], "");
  EXPECT_EQ(s["kills"], 3);
  // Dropped before each of the 4 restarts (3 kills and the final check) and
  // every 5 s: those restores read their pages from the disk.
  EXPECT_GE(s["page_cache_drops"].get<int>(), 4 + 2);
  EXPECT_GT(s["files_dropped"].get<int64_t>(), 0);
  EXPECT_GT(s["acknowledged_checked"].get<int64_t>(), 1000);
  EXPECT_EQ(s["acknowledged_lost"], 0);
  EXPECT_EQ(s["phantom"], 0);
  EXPECT_EQ(s["unexpected_errors"], 0);
  EXPECT_EQ(s["unexpected_exits"], 0);
  EXPECT_FALSE(s["hung"].get<bool>());
  EXPECT_GT(s["generate_streams"].get<int64_t>(), 100);
  EXPECT_GE(s["rss_samples"].get<int64_t>(), 10);
  EXPECT_EQ(r.exit_code, 0);
}

// Half the Creates and Appends as chat messages (the sessions become
// chats: the server renders turns, adds generation prompts and closes open
// assistant turns), 16 clients for 12 s, one kill -9: the same guarantees
// hold.
TEST_F(LoadToolTest, AChatCrashRunLosesNoAcknowledgedCallAndHasNoUnexpectedError) {
  const std::string model = WriteQwen3ChatModel("load_test_qwen3");
  if (model.empty()) GTEST_SKIP() << "no Qwen3 vocabulary in ../shared";
  const std::string summary = (tmp_ / "summary.json").string();
  ProcessResult r = KvsLoad({"--model", model, "--clients", "16", "--duration", "12s", "--kills", "1",
                             "--seed", "2", "--chat-fraction", "0.5", "--work-dir", (tmp_ / "work").string(),
                             "--summary-json", summary, "--strict-busy"});
  std::filesystem::remove(model);
  std::printf("%s", r.out.c_str());
  ASSERT_TRUE(std::filesystem::exists(summary)) << r.err;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(summary));
  EXPECT_EQ(s["fatal"], "");
  EXPECT_EQ(s["kills"], 1);
  EXPECT_GT(s["methods"]["Append(chat)"]["ok"].get<int64_t>(), 20);
  EXPECT_GT(s["methods"]["CreateSession(chat)"]["ok"].get<int64_t>(), 0);
  EXPECT_GT(s["methods"]["Generate"]["ok"].get<int64_t>(), 20);
  EXPECT_EQ(s["acknowledged_lost"], 0);
  EXPECT_EQ(s["phantom"], 0);
  EXPECT_EQ(s["unexpected_errors"], 0);
  EXPECT_EQ(s["unexpected_exits"], 0);
  EXPECT_FALSE(s["hung"].get<bool>());
  EXPECT_EQ(r.exit_code, 0);
}

// A vocabulary of characters renders each chat turn to dozens of tokens
// ("<|im_start|>user\n..." with ChatML), and this model's context is 128:
// the tool counts each turn with Tokenize before sending it, so its session
// cap holds the markup too and no call passes the context. One client, so
// no two calls of ours grow a session at once (the cap is a bound per
// call).
TEST_F(LoadToolTest, AChatRunOnASmallContextCountsTheRenderedTurnsAgainstTheSessionCap) {
  if (!std::filesystem::exists(Model())) GTEST_SKIP() << "../shared/models not present";
  const std::string summary = (tmp_ / "summary.json").string();
  ProcessResult r = KvsLoad({"--model", Model(), "--clients", "1", "--duration", "8s", "--kills", "1",
                             "--seed", "3", "--chat-fraction", "0.6", "--server-args", "--chat-template chatml",
                             "--work-dir", (tmp_ / "work").string(), "--summary-json", summary,
                             "--strict-busy"});
  std::printf("%s", r.out.c_str());
  ASSERT_TRUE(std::filesystem::exists(summary)) << r.err;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(summary));
  EXPECT_EQ(s["fatal"], "");
  EXPECT_GT(s["methods"]["Append(chat)"]["ok"].get<int64_t>(), 20);
  EXPECT_GT(s["methods"]["CreateSession(chat)"]["ok"].get<int64_t>(), 0);
  EXPECT_GT(s["methods"]["Tokenize"]["ok"].get<int64_t>(), 20);
  EXPECT_EQ(s["acknowledged_lost"], 0);
  EXPECT_EQ(s["unexpected_errors"], 0);
  EXPECT_EQ(r.exit_code, 0);
}

// Three tenants with API keys, over TLS with certificates made for the run,
// 12 clients for 10 s and one kill -9: nothing acknowledged is lost, and
// the tenants stay apart throughout. Every client's read of another
// tenant's session is NOT_FOUND, no listing shows another tenant's id, and
// after each restart every tenant's surviving sessions are still its own:
// NOT_FOUND with the next tenant's key.
TEST_F(LoadToolTest, ATenantRunOverTlsLosesNothingAndNoTenantSeesAnothersSessions) {
  if (!std::filesystem::exists(Model())) GTEST_SKIP() << "../shared/models not present";
  const std::string summary = (tmp_ / "summary.json").string();
  ProcessResult r = KvsLoad({"--model", Model(), "--clients", "12", "--duration", "10s", "--kills", "1",
                             "--seed", "4", "--tenants", "3", "--tls", "--work-dir", (tmp_ / "work").string(),
                             "--summary-json", summary, "--strict-busy"});
  std::printf("%s", r.out.c_str());
  ASSERT_TRUE(std::filesystem::exists(summary)) << r.err;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(summary));
  EXPECT_EQ(s["fatal"], "");
  EXPECT_EQ(s["tenants"], 3);
  EXPECT_TRUE(s["tls"].get<bool>());
  EXPECT_EQ(s["kills"], 1);
  EXPECT_GT(s["acknowledged_checked"].get<int64_t>(), 500);
  EXPECT_EQ(s["acknowledged_lost"], 0);
  EXPECT_GT(s["methods"]["GetSession:foreign"]["ok"].get<int64_t>(), 20);
  EXPECT_GT(s["methods"]["ListSessions"]["ok"].get<int64_t>(), 20);
  EXPECT_GT(s["isolation_checked"].get<int64_t>(), 10);
  EXPECT_EQ(s["isolation_breaches"], 0);
  EXPECT_EQ(s["unexpected_errors"], 0);
  EXPECT_EQ(s["unexpected_exits"], 0);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("callers: 3 tenants with API keys, over TLS"));
}

// A tenant held to max_sessions=2 (--tenant-quota) while the other runs
// free: load-t0's calls past its limit are RESOURCE_EXHAUSTED "tenant
// quota" (expected), load-t1 is never refused (any refusal of it would be
// unexpected), and at each restart load-t0 holds at most 2 sessions. With
// the server's session quota loosened by hand the restart check failed
// ("holds 5 under its quota max_sessions=2").
TEST_F(LoadToolTest, ATenantAtItsQuotaIsRefusedAndNoOtherTenantIs) {
  if (!std::filesystem::exists(Model())) GTEST_SKIP() << "../shared/models not present";
  const std::string summary = (tmp_ / "summary.json").string();
  ProcessResult r = KvsLoad({"--model", Model(), "--clients", "8", "--duration", "6s", "--kills", "1",
                             "--seed", "5", "--tenants", "2", "--tenant-quota", "max_sessions=2", "--work-dir",
                             (tmp_ / "work").string(), "--summary-json", summary, "--strict-busy"});
  std::printf("%s", r.out.c_str());
  ASSERT_TRUE(std::filesystem::exists(summary)) << r.err;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(summary));
  EXPECT_EQ(s["fatal"], "");
  EXPECT_EQ(s["tenant_quota"], "max_sessions=2");
  EXPECT_GT(s["quota_refusals"].get<int64_t>(), 10);
  EXPECT_EQ(s["quota_checked"], 2);  // the kill's restart and the final check
  EXPECT_EQ(s["quota_breaches"], 0);
  EXPECT_GT(s["acknowledged_checked"].get<int64_t>(), 200);
  EXPECT_EQ(s["acknowledged_lost"], 0);
  EXPECT_EQ(s["unexpected_errors"], 0);
  bool create_refused = false;
  for (const nlohmann::json& e : s["errors"]) {
    if (e["kind"] != "tenant quota") continue;
    EXPECT_EQ(e["code"], "RESOURCE_EXHAUSTED");
    EXPECT_TRUE(e["expected"].get<bool>());
    create_refused |= e["method"] == "CreateSession";
  }
  EXPECT_TRUE(create_refused) << s["errors"].dump();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("load-t0's quota max_sessions=2"));
}

// A tenant held to max_store_bytes and max_sessions at once: its writes
// past the limits are refused as expected, the server's own recount after
// the kill shows it within the store limit and its key lists no more
// sessions than its limit (a server that admitted writes up to 4x the limit failed this
// check: "holds 415856 under its quota max_store_bytes=300000"), and its
// clients delete after a refusal instead of writing into the quota call
// after call (before they did, 3,509 of 9,575 calls were refused in 15 s).
TEST_F(LoadToolTest, ATenantAtItsStoreQuotaIsRefusedFreesSpaceAndIsWithinItsQuotasAfterARestart) {
  if (!std::filesystem::exists(Model())) GTEST_SKIP() << "../shared/models not present";
  const std::string summary = (tmp_ / "summary.json").string();
  ProcessResult r = KvsLoad({"--model", Model(), "--clients", "8", "--duration", "6s", "--kills", "1",
                             "--seed", "11", "--tenants", "2", "--tenant-quota",
                             "max_store_bytes=300000,max_sessions=6",
                             "--work-dir", (tmp_ / "work").string(), "--summary-json", summary});
  std::printf("%s", r.out.c_str());
  ASSERT_TRUE(std::filesystem::exists(summary)) << r.err;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(summary));
  EXPECT_EQ(s["fatal"], "");
  EXPECT_EQ(s["tenant_quota"], "max_store_bytes=300000,max_sessions=6");
  EXPECT_EQ(s["quota_checked"], 4);  // both quotas at the kill's restart and at the final check
  EXPECT_EQ(s["quota_breaches"], 0);
  EXPECT_EQ(s["acknowledged_lost"], 0);
  EXPECT_EQ(s["unexpected_errors"], 0);
  int64_t calls = 0;
  for (const auto& [method, m] : s["methods"].items()) {
    calls += m["ok"].get<int64_t>() + m["expected_errors"].get<int64_t>() + m["unexpected_errors"].get<int64_t>();
  }
  const int64_t refused = s["quota_refusals"].get<int64_t>();
  EXPECT_GT(refused, 10);
  std::map<std::string, int64_t> by_quota;
  for (const nlohmann::json& e : s["errors"]) {
    if (e["kind"] == "tenant quota") by_quota[e["quota"].get<std::string>()] += e["count"].get<int64_t>();
  }
  EXPECT_GT(by_quota["max_store_bytes"], 0) << s["errors"].dump();
  for (const auto& [quota, n] : by_quota) EXPECT_TRUE(quota == "max_store_bytes" || quota == "max_sessions") << quota;
  EXPECT_LT(refused, calls / 5) << "load-t0 kept writing into its quota";
  EXPECT_EQ(r.exit_code, 0);
}

// A model without a chat template and no --chat-template: every chat call
// would fail alike, so the tool stops before the load and says why (it
// once ran a whole load of such calls, all counted as unexpected).
TEST_F(LoadToolTest, AChatRunAgainstAServerWithoutAChatTemplateStopsBeforeTheLoadAndSaysWhy) {
  if (!std::filesystem::exists(Model())) GTEST_SKIP() << "../shared/models not present";
  const std::string summary = (tmp_ / "summary.json").string();
  ProcessResult r = KvsLoad({"--model", Model(), "--clients", "4", "--duration", "20s", "--kills", "0",
                             "--chat-fraction", "0.5", "--work-dir", (tmp_ / "work").string(),
                             "--summary-json", summary});
  ASSERT_TRUE(std::filesystem::exists(summary)) << r.err;
  const nlohmann::json s = nlohmann::json::parse(ReadFile(summary));
  EXPECT_THAT(s["fatal"].get<std::string>(), HasSubstr("--chat-fraction: the server takes no chat messages"));
  EXPECT_THAT(s["fatal"].get<std::string>(), HasSubstr("names no chat template"));
  EXPECT_THAT(r.out, HasSubstr("FATAL: --chat-fraction"));
  EXPECT_TRUE(s["methods"].empty()) << s["methods"].dump();
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(LoadToolTest, HelpStatesWhichErrorsAreExpected) {
  ProcessResult r = KvsLoad({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("UNAVAILABLE while the tool has killed the server"));
  EXPECT_THAT(r.out, HasSubstr("issue 8 item 2"));
  EXPECT_THAT(r.out, HasSubstr("Anything else is unexpected"));
}

TEST_F(LoadToolTest, AMissingModelOrABadFlagIsAUsageError) {
  EXPECT_EQ(KvsLoad({"--model", (tmp_ / "absent.gguf").string()}).exit_code, 2);
  ProcessResult r = KvsLoad({"--model", Model(), "--clients", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--clients must be in [1, 1024]"));
  EXPECT_EQ(KvsLoad({"--model", Model(), "--skip-ops", "create"}).exit_code, 2);
  r = KvsLoad({"--model", Model(), "--chat-fraction", "1.5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--chat-fraction must be in [0, 1]"));
  r = KvsLoad({"--model", Model(), "--clients", "2", "--tenants", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tenants must not exceed --clients"));
  r = KvsLoad({"--model", Model(), "--tenants", "1", "--tenant-quota", "max_sessions=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tenant-quota needs --tenants of at least 2"));
  r = KvsLoad({"--model", Model(), "--tenants", "2", "--tenant-quota", "max_tokens=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tenant-quota must be NAME=VALUE of the keys file"));
}

}  // namespace
}  // namespace kvs
