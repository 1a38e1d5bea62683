// Integration tests of the service: the real kvsessiond binary on a
// loopback port with a temporary data dir and a model from ../shared,
// driven through the C++ client library over real gRPC.
#include <filesystem>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/kvsession_client.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/reference_data.h"
#include "tests/running_generate.h"
#include "tests/server_process.h"
#include "tests/service_fixture.h"
#include "tools/model_synth.h"

namespace kvs {
namespace {

namespace v1 = kvsession::v1;
using ::testing::HasSubstr;

class ServiceTest : public ServiceFixture {
 protected:
  // Writes a Q8_0 model (8 layers of 512, a 32,000-token vocabulary) into
  // the test's directory and returns its path: big enough that a long
  // prefill takes a while and 1,500 tokens of decode take seconds (about
  // 3.6 s on a 2-core Zen 5 under load), where tiny-llama-gqa runs them in
  // half a second.
  std::string WriteSlowModel() {
    SynthSpec spec;
    spec.dim = 512;
    spec.n_layers = 8;
    spec.n_heads = 8;
    spec.n_kv_heads = 4;
    spec.ffn_dim = 2048;
    spec.vocab_size = 32000;
    spec.context_length = 8192;
    spec.weight_type = GgmlType::kQ8_0;
    spec.vocab_from = SharedDir() + "/vocab/ggml-vocab-llama-spm.gguf";
    const std::string model = (dir_ / "big.gguf").string();
    const absl::Status written = WriteSynthModel(spec, model);
    EXPECT_TRUE(written.ok()) << written;
    return model;
  }
};

TEST_F(ServiceTest, StreamsAGreedyGenerationThatMatchesLlamaCpp) {
  StartServer("aidreams260K.gguf");
  for (const ReferenceLine& line : LoadReference(SharedDir() + "/reference/aidreams260K.jsonl")) {
    v1::Session s = Create(line.prompt);
    EXPECT_EQ(s.length(), static_cast<int>(line.prompt_ids.size()));
    std::vector<int> message_sizes;
    v1::GenerateRequest req;
    req.set_session_id(s.id());
    req.set_max_tokens(static_cast<int>(line.greedy_ids.size()));
    req.mutable_sampling()->set_temperature(0);
    absl::StatusOr<GenerateResult> r = client_->Generate(req, [&](const v1::GenerateResponse& m) {
      message_sizes.push_back(m.token_ids_size());
      return true;
    });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->ids, line.greedy_ids) << line.prompt;
    EXPECT_EQ(r->text, line.greedy_text);
    EXPECT_EQ(r->finish_reason, v1::FINISH_REASON_LENGTH);
    EXPECT_GE(message_sizes.size(), 2u) << "tokens are streamed, not sent at the end";
    EXPECT_EQ(r->usage.generated_tokens(), static_cast<int>(line.greedy_ids.size()));
    EXPECT_EQ(r->usage.session_tokens(), static_cast<int>(line.prompt_ids.size() + line.greedy_ids.size()));
    // The generated tokens stay in the session.
    absl::StatusOr<v1::Session> after = client_->GetSession(s.id(), true);
    ASSERT_TRUE(after.ok());
    std::vector<int32_t> expected = line.prompt_ids;
    expected.insert(expected.end(), line.greedy_ids.begin(), line.greedy_ids.end());
    EXPECT_EQ(std::vector<int32_t>(after->token_ids().begin(), after->token_ids().end()), expected);
  }
}

TEST_F(ServiceTest, GreedyOverGrpcEqualsLocalRun) {
  StartServer("tiny-llama-gqa.gguf");
  const std::string prompt = "The quick brown fox jumps over the lazy dog.";
  ProcessResult local = RunProcess({BinaryPath("kvsession"), "run", "--model", ModelPath("tiny-llama-gqa.gguf"),
                                    "--prompt", prompt, "-n", "40", "--temp", "0", "--json"},
                                   dir_.string());
  ASSERT_EQ(local.exit_code, 0) << local.err;
  nlohmann::json j = nlohmann::json::parse(local.out);
  v1::Session s = Create(prompt);
  GenerateResult r = Generate(s.id(), 40);
  EXPECT_EQ(r.ids, j["ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(r.text, j["text"].get<std::string>());
  // The same through Generate's own input on an empty session.
  v1::Session empty = Create("");
  GenerateResult r2 = Generate(empty.id(), 40, 0.0f, prompt);
  EXPECT_EQ(r2.ids, r.ids);
}

TEST_F(ServiceTest, AppendThenGenerateContinuesTheText) {
  StartServer("tiny-llama-gqa.gguf");
  v1::Session whole = Create("Once upon a time there was");
  v1::Session parts = Create("Once upon a time");
  absl::StatusOr<v1::AppendResponse> a = client_->Append(parts.id(), " there was");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->session().length(), whole.length()) << "appended text tokenizes as one text";
  EXPECT_GT(a->usage().prompt_tokens(), 0);
  EXPECT_EQ(Generate(parts.id(), 16).ids, Generate(whole.id(), 16).ids);
}

TEST_F(ServiceTest, ForkEightBranchesShareThePromptPagesAndSampleConcurrently) {
  StartServer("tiny-llama-gqa.gguf");
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "The machine dreamed of vectors and gradients. ";
  v1::Session root = Create(prompt);
  ASSERT_GT(root.length(), 100);
  absl::StatusOr<v1::ServerInfo> before = client_->GetServerInfo();
  ASSERT_TRUE(before.ok());

  v1::ForkRequest fork;
  fork.set_session_id(root.id());
  fork.set_count(8);
  absl::StatusOr<v1::ForkResponse> branches = client_->Fork(fork);
  ASSERT_TRUE(branches.ok()) << branches.status();
  ASSERT_EQ(branches->sessions_size(), 8);

  // Forking copied no KV: the page count is unchanged and every prompt page
  // is now shared by the root and its 8 branches.
  absl::StatusOr<v1::ServerInfo> after = client_->GetServerInfo();
  ASSERT_TRUE(after.ok());
  const int prompt_pages = (root.length() - 1 + 15) / 16;
  EXPECT_EQ(after->kv_cache().pages_in_use(), before->kv_cache().pages_in_use());
  EXPECT_GE(after->kv_cache().pages_shared(), prompt_pages);
  EXPECT_GE(after->kv_cache().page_references(), before->kv_cache().page_references() + 8 * prompt_pages);
  EXPECT_GE(after->kv_cache().bytes_saved_by_sharing(), 8 * prompt_pages * after->kv_cache().page_bytes());
  for (const auto& b : branches->sessions()) {
    EXPECT_EQ(b.length(), root.length());
    EXPECT_EQ(b.parent_session_id(), root.id());
    EXPECT_EQ(b.kv_pages_shared(), b.kv_pages()) << "a fresh branch shares all its pages";
  }

  // Sample all branches at once (temperature 1, each its own seed).
  std::vector<GenerateResult> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { results[i] = Generate(branches->sessions(i).id(), 24, 1.0f); });
  }
  for (auto& t : threads) t.join();
  std::set<std::vector<int32_t>> distinct;
  for (const auto& r : results) {
    EXPECT_EQ(r.ids.size(), 24u);
    distinct.insert(r.ids);
  }
  EXPECT_GE(distinct.size(), 4u) << "branches sample with different seeds";
  // The root is untouched by its branches.
  absl::StatusOr<v1::Session> root_after = client_->GetSession(root.id());
  EXPECT_EQ(root_after->length(), root.length());
}

// A branch's labels are the source's with the request's over them; all of
// them together obey the limit a new session's do (64), so Fork after
// Fork cannot grow a session's labels without end.
TEST_F(ServiceTest, AForkWhoseBranchesWouldHoldMoreThanSixtyFourLabelsIsInvalidArgumentAndMakesNone) {
  StartServer("aidreams260K.gguf");
  v1::CreateSessionRequest create;
  create.mutable_input()->set_text("Labelled");
  for (int i = 0; i < 60; ++i) (*create.mutable_labels())[absl::StrCat("source", i)] = "v";
  absl::StatusOr<v1::Session> source = client_->CreateSession(create);
  ASSERT_TRUE(source.ok()) << source.status();
  v1::ForkRequest fork;
  fork.set_session_id(source->id());
  fork.set_count(2);
  for (int i = 0; i < 5; ++i) (*fork.mutable_labels())[absl::StrCat("branch", i)] = "w";
  absl::StatusOr<v1::ForkResponse> r = client_->Fork(fork);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("a branch would have 65 labels"));
  EXPECT_EQ(client_->ListAllSessions()->size(), 1u);
  // Four new ones make 64; labels the source has already are replaced.
  fork.mutable_labels()->erase("branch4");
  (*fork.mutable_labels())["source0"] = "replaced";
  r = client_->Fork(fork);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->sessions_size(), 2);
  EXPECT_EQ(r->sessions(0).labels_size(), 64);
  EXPECT_EQ(r->sessions(0).labels().at("source0"), "replaced");
}

TEST_F(ServiceTest, ForkWithSeedsIsReproducible) {
  StartServer("aidreams260K.gguf");
  v1::Session root = Create("The machine dreamed of");
  v1::ForkRequest fork;
  fork.set_session_id(root.id());
  fork.set_count(2);
  fork.add_seeds(42);
  fork.add_seeds(42);
  absl::StatusOr<v1::ForkResponse> b = client_->Fork(fork);
  ASSERT_TRUE(b.ok()) << b.status();
  GenerateResult x = Generate(b->sessions(0).id(), 30, 1.0f);
  GenerateResult y = Generate(b->sessions(1).id(), 30, 1.0f);
  EXPECT_EQ(x.ids, y.ids) << "same seed, same prefix: same sample";
}

TEST_F(ServiceTest, TheCliSampleWithOneSeedSamplesDifferentBranchesAndRepeatsThem) {
  StartServer("aidreams260K.gguf");
  v1::Session root = Create("The machine dreamed of");
  auto sample = [&] {
    ProcessResult r = RunProcess({BinaryPath("kvsession"), "sample", "--server", server_->address(), "--session",
                                  root.id(), "--count", "3", "-n", "24", "--temp", "1.0", "--seed", "7", "--json"},
                                 dir_.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> texts;
    for (const auto& branch : nlohmann::json::parse(r.out)) texts.push_back(branch["text"].get<std::string>());
    return texts;
  };
  const std::vector<std::string> first = sample();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(std::set<std::string>(first.begin(), first.end()).size(), 3u)
      << "one --seed must not give every branch the same generator";
  EXPECT_EQ(sample(), first) << "the same --seed samples the same branches";
}

// A client that does not know whether its call ran (UNAVAILABLE, a lost
// connection) retries with the length it saw before: the input is added
// once.
TEST_F(ServiceTest, AnAppendOrGenerateWhoseExpectedLengthIsStaleIsFailedPreconditionAndAddsNothing) {
  StartServer("aidreams260K.gguf");
  const v1::Session s = Create("The machine dreamed of");
  v1::AppendRequest append;
  append.set_session_id(s.id());
  append.mutable_input()->set_text(" a city");
  append.set_expected_length(s.length());
  grpc::ClientContext first_ctx;
  v1::AppendResponse first;
  ASSERT_TRUE(client_->stub()->Append(&first_ctx, append, &first).ok());
  const int after = first.session().length();
  EXPECT_GT(after, s.length());
  // The retry of the same call: refused, nothing added.
  grpc::ClientContext retry_ctx;
  v1::AppendResponse retry;
  const grpc::Status refused = client_->stub()->Append(&retry_ctx, append, &retry);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr(absl::StrCat("holds ", after, " tokens, not the expected_length ", s.length())));
  EXPECT_EQ(client_->GetSession(s.id())->length(), after);

  v1::GenerateRequest generate;
  generate.set_session_id(s.id());
  generate.set_max_tokens(4);
  generate.mutable_input()->set_text(" of");
  generate.set_expected_length(s.length());
  EXPECT_EQ(client_->Generate(generate).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->GetSession(s.id())->length(), after);
  generate.set_expected_length(after);
  absl::StatusOr<GenerateResult> ran = client_->Generate(generate);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_GT(ran->usage.session_tokens(), after);
}

// A SentencePiece vocabulary: text appended after a special token (the
// EOS a Generate ended on stays in the session) begins a run, with the
// leading space, as the whole text would tokenize and as llama.cpp does;
// after ordinary text it continues without one.
TEST_F(ServiceTest, TextAppendedAfterASpecialTokenTokenizesAsAtTheStart) {
  StartServer("tiny-llama-gqa.gguf");
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok());
  const v1::Session fresh = Create("Hello world");
  absl::StatusOr<v1::Session> fresh_tokens = client_->GetSession(fresh.id(), true);
  ASSERT_TRUE(fresh_tokens.ok());
  const std::vector<int32_t> at_start(fresh_tokens->token_ids().begin() + 1, fresh_tokens->token_ids().end());

  // A session ending in EOS (id 2 in this vocabulary), as after a Generate that stopped on it.
  v1::CreateSessionRequest req;
  for (int32_t id : {450, 2}) req.mutable_input()->mutable_tokens()->add_ids(id);  // after BOS
  absl::StatusOr<v1::Session> ended = client_->CreateSession(req);
  ASSERT_TRUE(ended.ok()) << ended.status();
  absl::StatusOr<v1::AppendResponse> appended = client_->Append(ended->id(), "Hello world");
  ASSERT_TRUE(appended.ok()) << appended.status();
  absl::StatusOr<v1::Session> after = client_->GetSession(ended->id(), true);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(std::vector<int32_t>(after->token_ids().begin() + 3, after->token_ids().end()), at_start);

  // After ordinary text: a continuation ("Hello" + " world" = "Hello world").
  const v1::Session parts = Create("Hello");
  ASSERT_TRUE(client_->Append(parts.id(), " world").ok());
  EXPECT_EQ(client_->GetSession(parts.id(), true)->token_ids_size(), fresh_tokens->token_ids_size());
}

// A character whose bytes come in tokens of two Generate calls (the first
// cut by max_tokens) arrives whole in the second's text, as within one
// call: the stream texts concatenate to the session's text. The byte
// tokens of this SentencePiece vocabulary are forced by logit_bias
// (<0xE2> <0x82> <0xAC>: "€", ids 3 + byte).
TEST_F(ServiceTest, ACharacterSplitAcrossGenerateCallsArrivesWholeInTheCallThatCompletesIt) {
  StartServer("tiny-llama-gqa.gguf");
  const v1::Session s = Create("The price is");
  auto one = [&](int32_t forced) {
    v1::GenerateRequest req;
    req.set_session_id(s.id());
    req.set_max_tokens(1);
    req.mutable_sampling()->set_temperature(0);
    (*req.mutable_sampling()->mutable_logit_bias())[forced] = 100;
    absl::StatusOr<GenerateResult> r = client_->Generate(req);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->ids, std::vector<int32_t>{forced});
    return r.ok() ? r->text : std::string("(failed)");
  };
  EXPECT_EQ(one(3 + 0xE2), "") << "an incomplete character is held for the next call, not sent as U+FFFD";
  EXPECT_EQ(one(3 + 0x82), "");
  EXPECT_EQ(one(3 + 0xAC), "\xE2\x82\xAC");
}

TEST_F(ServiceTest, SnapshotsPastTheCheckpointLimitAreResourceExhaustedUntilOneIsDeleted) {
  StartServer("aidreams260K.gguf", {"--max-checkpoints", "2"});
  const v1::Session s = Create("The machine dreamed of");
  absl::StatusOr<v1::Checkpoint> first = client_->Snapshot(s.id(), "one");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(client_->Snapshot(s.id(), "two").ok());
  absl::StatusOr<v1::Checkpoint> third = client_->Snapshot(s.id(), "three");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_THAT(std::string(third.status().message()), ::testing::HasSubstr("--max-checkpoints"));
  ASSERT_TRUE(client_->DeleteCheckpoint(first->id()).ok());
  EXPECT_TRUE(client_->Snapshot(s.id(), "three").ok());
}

TEST_F(ServiceTest, SnapshotRestoreIntoANewBranchAndContinue) {
  StartServer("tiny-llama-gqa.gguf");
  v1::Session s = Create("Once upon a time");
  Generate(s.id(), 20);
  absl::StatusOr<v1::Checkpoint> ckpt = client_->Snapshot(s.id(), "after-20");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->length(), s.length() + 20);
  EXPECT_EQ(ckpt->name(), "after-20");
  // The original moves on.
  GenerateResult original_next = Generate(s.id(), 15);
  Generate(s.id(), 10);
  // Restoring the checkpoint creates a new session at the checkpoint.
  absl::StatusOr<v1::Session> restored = client_->RestoreCheckpoint(ckpt->id());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_NE(restored->id(), s.id());
  EXPECT_EQ(restored->length(), ckpt->length());
  EXPECT_EQ(restored->checkpoint_id(), ckpt->id());
  GenerateResult restored_next = Generate(restored->id(), 15);
  EXPECT_EQ(restored_next.ids, original_next.ids);
  // The checkpoint is listed, and outlives its session.
  ASSERT_TRUE(client_->DeleteSession(s.id()).ok());
  absl::StatusOr<v1::ListCheckpointsResponse> list = client_->ListCheckpoints("");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->checkpoints_size(), 1);
  absl::StatusOr<v1::Session> again = client_->RestoreCheckpoint(ckpt->id());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Generate(again->id(), 15).ids, original_next.ids);
}

TEST_F(ServiceTest, CancelledStreamKeepsItsTokensAndTheSessionAcceptsTheNextGenerate) {
  StartServer("tiny-llama-gqa.gguf");
  v1::Session s = Create("Once upon a time");
  v1::GenerateRequest req;
  req.set_session_id(s.id());
  req.set_max_tokens(1500);
  req.mutable_sampling()->set_temperature(0);
  req.set_ignore_eos(true);
  int received = 0;
  GenerateResult partial;
  absl::StatusOr<GenerateResult> r = client_->Generate(
      req, [&](const v1::GenerateResponse& m) { return (received += m.token_ids_size()) < 10; },
      std::nullopt, &partial);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_GE(partial.ids.size(), 10u);
  // The server stops within a step; the session keeps what it generated.
  absl::StatusOr<v1::Session> after;
  for (int i = 0; i < 200; ++i) {
    after = client_->GetSession(s.id());
    if (after.ok() && after->state() == v1::SESSION_STATE_IDLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), v1::SESSION_STATE_IDLE);
  EXPECT_GE(after->length(), s.length() + static_cast<int>(partial.ids.size()));
  EXPECT_LT(after->length(), s.length() + 1500) << "generation stopped early";
  absl::StatusOr<v1::Session> with_ids = client_->GetSession(s.id(), true);
  for (size_t i = 0; i < partial.ids.size(); ++i) {
    EXPECT_EQ(with_ids->token_ids(s.length() + static_cast<int>(i)), partial.ids[i]);
  }
  GenerateResult next = Generate(s.id(), 5);
  EXPECT_EQ(next.ids.size(), 5u);
  EXPECT_EQ(next.usage.session_tokens(), after->length() + 5);
}

TEST_F(ServiceTest, DeadlineStopsTheGenerationLikeACancel) {
  StartServer("tiny-llama-gqa.gguf");
  v1::Session s = Create("Once upon a time");
  v1::GenerateRequest req;
  req.set_session_id(s.id());
  req.set_max_tokens(2000);
  req.set_ignore_eos(true);
  absl::StatusOr<GenerateResult> r = client_->Generate(req, nullptr, std::chrono::milliseconds(300));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<v1::Session> now = client_->GetSession(s.id());
    if (now.ok() && now->state() == v1::SESSION_STATE_IDLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Generate(s.id(), 3).ids.size(), 3u);
}

TEST_F(ServiceTest, DeadlineStopsALongAppendAndTheSessionCatchesUpLater) {
  StartServer(WriteSlowModel());
  v1::Session s = Create("Once upon a time");
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += " the machine dreamed of vectors";
  v1::AppendRequest req;
  req.set_session_id(s.id());
  req.mutable_input()->set_text(long_text);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(150));
  v1::AppendResponse resp;
  const auto start = std::chrono::steady_clock::now();
  grpc::Status st = client_->stub()->Append(&ctx, req, &resp);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server stops within a step: the session is idle again long before
  // the whole prefill could have run.
  absl::StatusOr<v1::Session> now;
  for (int i = 0; i < 2000; ++i) {  // up to 10 s: a loaded machine (ctest -j2, sanitizers) steps slowly
    now = client_->GetSession(s.id());
    if (now.ok() && now->state() == v1::SESSION_STATE_IDLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->state(), v1::SESSION_STATE_IDLE);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  EXPECT_LT(info->engine().prefill_tokens(), now->length() - 10)
      << "the prefill stopped early (" << waited << " s)";
  // The appended text stays; the next Generate catches the KV up and runs.
  GenerateResult r = Generate(s.id(), 3);
  EXPECT_EQ(r.ids.size(), 3u);
  EXPECT_EQ(r.usage.session_tokens(), now->length() + 3);
}

TEST_F(ServiceTest, ASecondGenerateOnABusySessionIsAbortedNamingTheRunningCall) {
  // The running Generate must outlast the checks below. On tiny-llama-gqa
  // its 1,500 tokens took about 0.55 s, and on the slow model under ctest
  // -j2 in CI they still ended before the last check (the Fork) once; so
  // the slow model, and tokens up to its context: many seconds even on a
  // fast machine. The call is cancelled as soon as the checks are done.
  StartServer(WriteSlowModel(), {"--max-tokens-per-generate", "8000"});
  v1::Session s = Create("Once upon a time");
  RunningGenerate long_one(*client_, s.id(), /*max_tokens=*/8000);
  ASSERT_TRUE(long_one.WaitStarted());
  v1::GenerateRequest req;
  req.set_session_id(s.id());
  req.set_max_tokens(5);
  absl::StatusOr<GenerateResult> second = client_->Generate(req);
  // A transient conflict: ABORTED (retryable), naming what runs.
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("busy: a Generate is running"));
  EXPECT_EQ(client_->Append(s.id(), "more").status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(client_->DeleteSession(s.id()).code(), absl::StatusCode::kAborted);
  v1::ForkRequest fork;
  fork.set_session_id(s.id());
  fork.set_count(1);
  EXPECT_EQ(client_->Fork(fork).status().code(), absl::StatusCode::kAborted);
}

TEST_F(ServiceTest, BadRequestsGetClearErrorsAndChangeNothing) {
  StartServer("aidreams260K.gguf", {"--max-sessions", "3"});
  v1::Session s = Create("I was flying");
  auto code = [](const absl::Status& st) { return st.code(); };

  // A well-formed id that names nothing is NOT_FOUND; a malformed one is
  // INVALID_ARGUMENT, and its message quotes only a short prefix.
  const std::string missing = "ses_00000000000000000000000000000000";
  EXPECT_EQ(code(client_->GetSession(missing).status()), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(client_->GetSession("ses_nope").status()), absl::StatusCode::kInvalidArgument);
  v1::GenerateRequest g;
  g.set_session_id(missing);
  EXPECT_EQ(code(client_->Generate(g).status()), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(client_->Append(s.id(), "").status()), absl::StatusCode::kInvalidArgument);

  g.set_session_id(s.id());
  g.mutable_sampling()->set_top_p(1.5f);
  absl::StatusOr<GenerateResult> bad = client_->Generate(g);
  EXPECT_EQ(code(bad.status()), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("top_p"));
  g.clear_sampling();
  g.set_max_tokens(0);
  EXPECT_EQ(code(client_->Generate(g).status()), absl::StatusCode::kInvalidArgument);
  g.set_max_tokens(5);
  g.set_top_logprobs(99);
  EXPECT_EQ(code(client_->Generate(g).status()), absl::StatusCode::kInvalidArgument);

  v1::AppendRequest bad_ids;
  bad_ids.set_session_id(s.id());
  bad_ids.mutable_input()->mutable_tokens()->add_ids(100000);
  absl::StatusOr<v1::AppendResponse> a = client_->Append(bad_ids);
  EXPECT_EQ(code(a.status()), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("vocabulary"));

  // The model's context is 128 tokens.
  std::string long_text;
  for (int i = 0; i < 60; ++i) long_text += " the machine";
  absl::StatusOr<v1::AppendResponse> too_long = client_->Append(s.id(), long_text);
  EXPECT_EQ(code(too_long.status()), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(too_long.status().message()), HasSubstr("context limit is 128"));

  // Invalid UTF-8 in the text.
  v1::AppendRequest bad_text;
  bad_text.set_session_id(s.id());
  bad_text.mutable_input()->set_text(std::string("ab\xff\xfe", 4));
  EXPECT_EQ(code(client_->Append(bad_text).status()), absl::StatusCode::kInvalidArgument);

  v1::ForkRequest fork;
  fork.set_session_id(s.id());
  fork.set_count(0);
  EXPECT_EQ(code(client_->Fork(fork).status()), absl::StatusCode::kInvalidArgument);
  fork.set_count(5);  // 1 + 5 > 3 sessions
  absl::StatusOr<v1::ForkResponse> over = client_->Fork(fork);
  EXPECT_EQ(code(over.status()), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("at most 3 sessions"));

  // Nothing above changed the session.
  absl::StatusOr<v1::Session> after = client_->GetSession(s.id());
  EXPECT_EQ(after->length(), s.length());
  EXPECT_EQ(Generate(s.id(), 4).ids.size(), 4u);
}

TEST_F(ServiceTest, ListSessionsPagesAndDeleteRemovesFromRamAndDisk) {
  StartServer("aidreams260K.gguf");
  std::set<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.insert(Create("I was flying").id());
  std::set<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    absl::StatusOr<v1::ListSessionsResponse> page = client_->ListSessions(2, token);
    ASSERT_TRUE(page.ok());
    for (const auto& s : page->sessions()) listed.insert(s.id());
    token = page->next_page_token();
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(listed, ids);
  EXPECT_EQ(pages, 3);
  const std::string victim = *ids.begin();
  ASSERT_TRUE(client_->DeleteSession(victim).ok());
  EXPECT_EQ(client_->GetSession(victim).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->DeleteSession(victim).code(), absl::StatusCode::kNotFound);
  // Gone from disk too: a restart does not bring it back.
  ASSERT_EQ(server_->Stop(), 0);
  StartServer("aidreams260K.gguf");
  absl::StatusOr<std::vector<v1::Session>> all = client_->ListAllSessions();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 4u);
  for (const auto& s : *all) EXPECT_NE(s.id(), victim);
}

TEST_F(ServiceTest, StopStringsAndLogprobs) {
  StartServer("aidreams260K.gguf");
  auto ref = LoadReference(SharedDir() + "/reference/aidreams260K.jsonl");
  v1::Session s = Create(ref[0].prompt);
  v1::GenerateRequest req;
  req.set_session_id(s.id());
  req.set_max_tokens(48);
  req.mutable_sampling()->set_temperature(0);
  req.add_stop("Contrast");
  req.set_top_logprobs(3);
  absl::StatusOr<GenerateResult> r = client_->Generate(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->finish_reason, v1::FINISH_REASON_STOP_SEQUENCE);
  const std::string& full = ref[0].greedy_text;
  EXPECT_EQ(r->text, full.substr(0, full.find("Contrast")));
  ASSERT_EQ(r->logprobs.size(), r->ids.size());
  for (size_t i = 0; i < r->ids.size(); ++i) {
    const auto& lp = r->logprobs[i];
    EXPECT_EQ(lp.sampled().token_id(), r->ids[i]);
    ASSERT_EQ(lp.top_size(), 3);
    EXPECT_EQ(lp.top(0).token_id(), r->ids[i]) << "greedy picks the most likely token";
    EXPECT_LE(lp.top(1).logprob(), lp.top(0).logprob());
    EXPECT_LT(lp.top(0).logprob(), 0.0f);
  }
}

TEST_F(ServiceTest, HealthAndInfo) {
  StartServer("aidreams260K.gguf");
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->model().architecture(), "llama");
  EXPECT_EQ(info->model().vocab_size(), 512);
  EXPECT_EQ(info->limits().max_context(), 128);
  EXPECT_EQ(info->model().fingerprint().size(), 64u);
  EXPECT_EQ(info->kv_cache().dtype(), "f16");
  EXPECT_FALSE(info->kernels().empty());
}

}  // namespace
}  // namespace kvs
