// Recovery: a reopened store gives back every record and the same reference
// counts, and a writer process that dies without closing the store (exit
// without cleanup, or SIGKILL in the middle of a sequence of writes) loses
// no acknowledged write and leaves nothing half-applied.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/str_cat.h"
#include "cache/page_codec.h"
#include "cache/session_store.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

KvGeometry Geometry() {
  return {.n_layers = 2, .n_kv_heads = 1, .head_dim = 4, .page_tokens = 8, .dtype = KvDtype::kF32};
}

// The K or V value at position `pos`: like a model's, it depends on every
// token up to and including `pos`.
float KvValue(const SessionRecord& r, int pos, int layer, KvPart part, int d) {
  uint32_t h = 17;
  for (int q = 0; q <= pos; ++q) h = h * 31 + static_cast<uint32_t>(r.tokens(q));
  return static_cast<float>(h % 100000) + 0.5f * layer + 0.25f * static_cast<int>(part) +
         0.125f * d;
}

// The RAM page `page` of `r`, filled with KvValue for its valid slots.
std::vector<float> KvPage(const SessionRecord& r, int page) {
  const KvGeometry g = Geometry();
  std::vector<float> ram(g.page_bytes() / sizeof(float), 0.0f);
  for (int s = 0; s < PageTokensAt(g, r.kv_length(), page); ++s) {
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
        float* slot = ram.data() + (g.block_offset(layer, part, 0) + g.slot_offset(s)) / 4;
        for (int d = 0; d < g.head_dim; ++d) {
          slot[d] = KvValue(r, page * g.page_tokens + s, layer, part, d);
        }
      }
    }
  }
  return ram;
}

absl::StatusOr<std::string> EncodeKvPage(const SessionRecord& r, int page) {
  const std::vector<float> ram = KvPage(r, page);
  return EncodePage(Geometry(), reinterpret_cast<const uint8_t*>(ram.data()),
                    PageTokensAt(Geometry(), r.kv_length(), page));
}

// One step of the writers' deterministic sequence: sessions s0..s3 are
// rewritten in turn with a common first page and lengths that grow and
// shrink; every seventh step deletes the session instead.
struct Op {
  std::string id;
  std::optional<SessionRecord> put;  // nullopt: delete
};

Op StepOp(int step) {
  Op op{absl::StrCat("s", step % 4), std::nullopt};
  if (step % 7 == 6) return op;
  SessionRecord r;
  r.set_id(op.id);
  r.set_model_fingerprint("model-r");
  *r.mutable_geometry() = ToGeometryRecord(Geometry());
  for (int i = 0; i < 10; ++i) r.add_tokens(1000 + i);
  r.add_tokens(step % 4);
  for (int i = 0; i < 3 + (step * 5) % 23; ++i) r.add_tokens(step * 100 + i);
  r.set_kv_length(r.tokens_size() - 1);
  r.set_version(static_cast<uint64_t>(step));
  ABSL_RAW_CHECK(FillPageHashes(&r).ok(), "FillPageHashes");
  op.put = std::move(r);
  return op;
}

absl::Status Apply(SessionStore& store, const Op& op) {
  if (!op.put.has_value()) return store.DeleteSession(op.id);
  return store.PutSession(*op.put, [&](int page) { return EncodeKvPage(*op.put, page); });
}

using State = std::map<std::string, SessionRecord>;

// What the store holds after the first `steps` steps.
State Expected(int steps) {
  State state;
  for (int step = 0; step < steps; ++step) {
    Op op = StepOp(step);
    if (op.put.has_value()) {
      state[op.id] = *std::move(op.put);
    } else {
      state.erase(op.id);
    }
  }
  return state;
}

bool SameState(const State& a, const State& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [id, record] : a) {
    auto it = b.find(id);
    if (it == b.end() || !google::protobuf::util::MessageDifferencer::Equals(record, it->second)) {
      return false;
    }
  }
  return true;
}

// The writer process: runs steps [0, steps) (forever if steps < 0) on the
// store in `dir`, writing each step number to `ack_fd` once the store has
// acknowledged it, then exits without closing anything, as on a crash.
[[noreturn]] void RunWriter(const std::string& dir, bool sync, int steps, int ack_fd) {
  StoreOptions options;
  options.sync_writes = sync;
  absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(dir, options);
  if (!store.ok()) _exit(2);
  std::vector<SessionRecord> sessions;
  std::vector<CheckpointRecord> checkpoints;
  if (!(*store)->LoadAll(&sessions, &checkpoints).ok()) _exit(3);
  for (int step = 0; steps < 0 || step < steps; ++step) {
    if (!Apply(**store, StepOp(step)).ok()) _exit(4);
    if (write(ack_fd, &step, sizeof(step)) != sizeof(step)) _exit(5);
  }
  _exit(0);
}

class RecoveryTest : public testing::Test {
 protected:
  void TearDown() override { store_.reset(); }

  // (Re)opens the store and loads it; returns its sessions by id.
  State Reopen() {
    store_.reset();  // the directory's lock is free again
    store_ = SessionStore::Open(dir_, {}).value();
    std::vector<SessionRecord> sessions;
    std::vector<CorruptEntry> corrupt;
    const absl::Status loaded = store_->LoadAll(&sessions, &checkpoints_, &corrupt);
    EXPECT_TRUE(loaded.ok() && corrupt.empty()) << loaded;
    State state;
    for (SessionRecord& r : sessions) state[r.id()] = std::move(r);
    return state;
  }

  // Every page of every session decodes to the KV it was written with, and
  // the pages column family holds exactly the referenced pages.
  void ExpectConsistent(const State& state) {
    const KvGeometry g = Geometry();
    for (const auto& [id, r] : state) {
      for (int i = 0; i < r.page_hashes_size(); ++i) {
        std::vector<float> page(g.page_bytes() / sizeof(float), 0.0f);
        const absl::Status s =
            store_->ReadPage(*PageHash::FromBytes(r.page_hashes(i)), g,
                             PageTokensAt(g, r.kv_length(), i),
                             reinterpret_cast<uint8_t*>(page.data()));
        ASSERT_TRUE(s.ok()) << id << " page " << i << ": " << s;
        EXPECT_EQ(page, KvPage(r, i)) << id << " page " << i;
      }
    }
    absl::StatusOr<VerifyReport> report = store_->Verify();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_TRUE(report->missing_pages.empty());
    EXPECT_TRUE(report->orphan_pages.empty());
    EXPECT_TRUE(report->corrupt_pages.empty());
    EXPECT_EQ(report->pages_checked, store_->Stats().pages);
    // One page file per page: a kill between a page file and its batch
    // left files that the reopen (LoadAll) deleted.
    EXPECT_EQ(PageFilesOnDisk(), store_->Stats().pages);
  }

  int64_t PageFilesOnDisk() const {
    int64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/pages")) n += e.path().extension() == ".kvpage";
    return n;
  }

  // Deletes every record; then no page may remain.
  void ExpectEverythingCollectable(const State& state) {
    for (const auto& [id, r] : state) ASSERT_TRUE(store_->DeleteSession(id).ok()) << id;
    for (const CheckpointRecord& cp : checkpoints_) ASSERT_TRUE(store_->DeleteCheckpoint(cp.id()).ok());
    const StoreStats s = store_->Stats();
    EXPECT_EQ(s.pages, 0);
    EXPECT_EQ(s.page_references, 0);
    EXPECT_EQ(s.page_bytes, 0);
    absl::StatusOr<VerifyReport> report = store_->Verify();
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->pages_checked, 0);  // nothing left behind on disk
    EXPECT_EQ(PageFilesOnDisk(), 0);
  }

  // Starts RunWriter in a child process; *ack_fd reads its acknowledgements.
  pid_t StartWriter(bool sync, int steps, int* ack_fd) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      RunWriter(dir_, sync, steps, fds[1]);
    }
    close(fds[1]);
    *ack_fd = fds[0];
    return pid;
  }

  // Reads acknowledgements until `want` have come (want < 0: until the
  // writer closes the pipe) or a minute has passed; returns how many came.
  static int ReadAcks(int fd, int want, int acked) {
    while (want < 0 || acked < want) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 60000) <= 0) break;
      int step = -1;
      if (read(fd, &step, sizeof(step)) != sizeof(step)) break;
      EXPECT_EQ(step, acked);
      ++acked;
    }
    return acked;
  }

  ScratchDir scratch_{"recovery_test"};
  const std::string dir_ = scratch_.string();
  std::unique_ptr<SessionStore> store_;
  std::vector<CheckpointRecord> checkpoints_;
};

TEST_F(RecoveryTest, ReopenGivesBackEveryRecordAndTheSameCounts) {
  Reopen();
  for (int step = 0; step < 12; ++step) ASSERT_TRUE(Apply(*store_, StepOp(step)).ok()) << step;
  const State state = Expected(12);
  CheckpointRecord cp;
  cp.set_id("cp");
  cp.set_name("after step 12");
  *cp.mutable_session() = state.begin()->second;
  ASSERT_TRUE(store_->PutCheckpoint(cp).ok());
  const StoreStats before = store_->Stats();

  const State reloaded = Reopen();
  EXPECT_TRUE(SameState(reloaded, state));
  ASSERT_EQ(checkpoints_.size(), 1u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(checkpoints_[0], cp));
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.pages, before.pages);
  EXPECT_EQ(after.page_bytes, before.page_bytes);
  EXPECT_EQ(after.page_references, before.page_references);
  EXPECT_EQ(after.sessions, before.sessions);
  EXPECT_EQ(after.checkpoints, 1);
  ExpectConsistent(reloaded);

  // The checkpoint keeps its session's pages after a reopen too.
  ASSERT_TRUE(store_->DeleteSession(cp.session().id()).ok());
  EXPECT_TRUE(store_->HasPage(*PageHash::FromBytes(cp.session().page_hashes(1))));
  State rest = reloaded;
  rest.erase(cp.session().id());
  ExpectEverythingCollectable(rest);
}

TEST_F(RecoveryTest, WriterExitingWithoutCloseLosesNothing) {
  int ack_fd = -1;
  const pid_t pid = StartWriter(/*sync=*/true, 20, &ack_fd);
  ASSERT_GT(pid, 0);
  const int acked = ReadAcks(ack_fd, -1, 0);
  close(ack_fd);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(acked, 20);

  const State state = Reopen();
  EXPECT_TRUE(SameState(state, Expected(20)));
  ExpectConsistent(state);
  ExpectEverythingCollectable(state);
}

struct KillCase {
  int kill_after;  // acknowledged steps before the SIGKILL is sent
  bool sync;
};

class KillTest : public RecoveryTest, public testing::WithParamInterface<KillCase> {};

TEST_P(KillTest, SigkillMidSequenceKeepsEveryAcknowledgedWrite) {
  int ack_fd = -1;
  const pid_t pid = StartWriter(GetParam().sync, /*steps=*/-1, &ack_fd);
  ASSERT_GT(pid, 0);
  int acked = ReadAcks(ack_fd, GetParam().kill_after, 0);
  ASSERT_EQ(acked, GetParam().kill_after);
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  acked = ReadAcks(ack_fd, -1, acked);  // those sent before the kill landed
  close(ack_fd);

  // Every acknowledged step is there; the one in flight is all there or
  // not at all.
  const State state = Reopen();
  const bool old_state = SameState(state, Expected(acked));
  const bool new_state = SameState(state, Expected(acked + 1));
  EXPECT_TRUE(old_state || new_state) << "acknowledged " << acked << " steps";
  ExpectConsistent(state);

  // The store keeps working: more steps, then collect everything.
  const int next = new_state ? acked + 1 : acked;
  for (int step = next; step < next + 5; ++step) {
    ASSERT_TRUE(Apply(*store_, StepOp(step)).ok()) << step;
  }
  const State later = Reopen();
  EXPECT_TRUE(SameState(later, Expected(next + 5)));
  ExpectConsistent(later);
  ExpectEverythingCollectable(later);
}

INSTANTIATE_TEST_SUITE_P(KillPoints, KillTest,
                         testing::Values(KillCase{1, true}, KillCase{9, true},
                                         KillCase{23, true}, KillCase{14, false}),
                         [](const testing::TestParamInfo<KillCase>& info) {
                           return absl::StrCat("after", info.param.kill_after,
                                               info.param.sync ? "_sync" : "_nosync");
                         });

}  // namespace
}  // namespace kvs
