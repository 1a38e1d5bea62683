// Test-only: a real service stack in one process for the service/ unit
// tests: the trained aidreams260K model from ../shared, a page pool, a
// RocksDB session store in a fresh ScratchDir (tests/scratch_dir.h), a SessionManager,
// and a forward pass to fill sessions' KV without the engine.
//
// Tests skip (GTEST_SKIP) when ../shared is absent. Not thread-safe; one per
// test.
#ifndef KVSESSION_SERVICE_SERVICE_TEST_ENV_H_
#define KVSESSION_SERVICE_SERVICE_TEST_ENV_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "cache/session_store.h"
#include "model/model.h"
#include "model/thread_pool.h"
#include "model/transformer.h"
#include "service/session_manager.h"
#include "tests/scratch_dir.h"

namespace kvs {

// Store options whose file system is `fs` (the fault tests' injector).
inline StoreOptions StoreOn(std::shared_ptr<rocksdb::FileSystem> fs) {
  StoreOptions options;
  options.file_system = std::move(fs);
  return options;
}

class ServiceTestEnv {
 public:
  static std::string ModelPath() {
    return absl::StrCat(KVS_SHARED_DIR, "/models/aidreams260K.gguf");
  }
  static bool Available() { return std::filesystem::exists(ModelPath()); }

  // A stack with a pool of `max_pages` pages of `page_tokens` tokens.
  explicit ServiceTestEnv(int64_t max_pages = 256, int page_tokens = 16, StoreOptions store_options = {}) {
    auto model = Model::Load(ModelPath());
    EXPECT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    limits_.max_context = model_->config().context_length;
    threads_ = std::make_unique<ThreadPool>(1);
    transformer_ = std::make_unique<Transformer>(model_->config(), model_->weights(), threads_.get(),
                                                 128, limits_.max_context);
    pool_ = std::make_unique<PagePool>(transformer_->kv_geometry(page_tokens, KvDtype::kF16), max_pages);
    OpenStore(store_options);
    Reopen();
  }
  ~ServiceTestEnv() {
    sessions_.reset();
    store_.reset();
  }

  // A new SessionManager over the same store (a restart: KV only on disk).
  void Reopen() {
    sessions_.reset();
    sessions_ = std::make_unique<SessionManager>(*model_, pool_.get(), store_.get(),
                                                 std::string(32, 'f'), limits_);
    EXPECT_TRUE(sessions_->LoadFromStore().ok());
  }
  void OpenStore(StoreOptions options) {
    sessions_.reset();
    store_.reset();
    auto store = SessionStore::Open(dir_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // Appends `tokens` to an acquired session and computes their KV except
  // the last token's (the idle invariant), as an Append job does.
  void Prefill(Session& s, const std::vector<int32_t>& tokens) {
    SessionKv kv = sessions_->OpenKv(s);
    kv.ReserveCapacity(tokens.size());
    s.AppendTokens(tokens);
    std::vector<float> logits(model_->config().vocab_size);
    while (kv.lag() > 0) {
      const int n = std::min(kv.lag(), 64);
      ASSERT_TRUE(kv.Reserve(n).ok());
      ForwardItem item = kv.Item(n, Logits::kNone);
      ASSERT_TRUE(transformer_->Forward({&item, 1}, logits.data()).ok());
      kv.Commit();
    }
  }

  // A persisted idle session holding BOS + `n` tokens.
  std::string MakeSession(int n, int32_t first_token = 10) {
    auto s = sessions_->CreateAcquired(SamplingParams{}, {});
    EXPECT_TRUE(s.ok()) << s.status();
    std::vector<int32_t> tokens;
    for (int i = 0; i < n; ++i) tokens.push_back(first_token + i % 300);
    Prefill(**s, tokens);
    EXPECT_TRUE(sessions_->PersistAndRelease(*s).ok());
    return (*s)->id;
  }

  const Model& model() const { return *model_; }
  PagePool& pool() { return *pool_; }
  SessionStore& store() { return *store_; }
  SessionManager& sessions() { return *sessions_; }
  const std::string& dir() const { return dir_; }
  ServiceLimits& limits() { return limits_; }

 private:
  ScratchDir scratch_{"kvs_service_test"};
  const std::string dir_ = scratch_.string();
  std::unique_ptr<Model> model_;
  ServiceLimits limits_;
  std::unique_ptr<ThreadPool> threads_;
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<SessionStore> store_;
  std::unique_ptr<SessionManager> sessions_;
};

#define KVS_REQUIRE_SHARED_MODEL()                                              \
  if (!::kvs::ServiceTestEnv::Available()) GTEST_SKIP() << "../shared is absent"

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SERVICE_TEST_ENV_H_
