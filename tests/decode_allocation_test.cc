// The decode loop allocates nothing: a counting global operator new shows
// that once a sequence is running, forward passes (batched decode of
// several forks) and sampling make no heap allocation.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "absl/strings/str_cat.h"
#include "cache/kv_sequence.h"
#include "gtest/gtest.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/thread_pool.h"
#include "model/transformer.h"
#include "tests/reference_data.h"

namespace {
std::atomic<long> g_allocations{0};

// Every replaceable allocation form counts and takes its memory from
// malloc/aligned_alloc, and every deallocation form frees it: replacing only
// some forms would pair the runtime's (or a sanitizer's) operator new with
// our free, which AddressSanitizer reports as alloc-dealloc-mismatch.
void* CountedAlloc(size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* CountedAlignedAlloc(size_t n, std::align_val_t al) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t a = static_cast<size_t>(al);
  // aligned_alloc wants a size that is a multiple of the alignment.
  return std::aligned_alloc(a, ((n ? n : 1) + a - 1) / a * a);
}
void* OrThrow(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return OrThrow(CountedAlloc(n)); }
void* operator new[](size_t n) { return OrThrow(CountedAlloc(n)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return CountedAlloc(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return CountedAlloc(n); }
void* operator new(size_t n, std::align_val_t al) { return OrThrow(CountedAlignedAlloc(n, al)); }
void* operator new[](size_t n, std::align_val_t al) {
  return OrThrow(CountedAlignedAlloc(n, al));
}
void* operator new(size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return CountedAlignedAlloc(n, al);
}
void* operator new[](size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  return CountedAlignedAlloc(n, al);
}
// GCC cannot see that these replace the global operators it pairs free with.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace kvs {
namespace {

TEST(DecodeAllocationTest, BatchedDecodeStepsAndSamplingAllocateNothing) {
  const std::string path = absl::StrCat(SharedDir(), "/models/tiny-llama-gqa.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "../shared absent";
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok());
  const ModelConfig& c = (*model)->config();
  ThreadPool threads(2);
  Transformer t(c, (*model)->weights(), &threads, 256, c.context_length);
  PagePool pool(t.kv_geometry(16, KvDtype::kF16), 512);
  Sampler sampler(c.vocab_size);
  SamplingParams params;  // temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
  params.repetition_penalty = 1.1f;

  // A prompt, then 4 forks decoding together in one batch per step.
  constexpr int kForks = 4, kSteps = 80;
  KvSequence root(&pool);
  std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278};
  std::vector<float> logits(static_cast<size_t>(kForks) * c.vocab_size);
  ForwardItem p{&root, prompt};
  ASSERT_TRUE(root.PrepareAppend(static_cast<int>(prompt.size())).ok());
  ASSERT_TRUE(t.Forward({&p, 1}, logits.data()).ok());
  std::vector<KvSequence> forks;
  std::vector<std::vector<int32_t>> tokens(kForks, prompt);
  std::vector<SequenceRng> rngs;
  for (int i = 0; i < kForks; ++i) {
    forks.push_back(root.Fork());
    rngs.emplace_back(100 + i);
    tokens[i].reserve(prompt.size() + kSteps + 16);
    forks[i].ReserveTable(static_cast<int>(prompt.size()) + kSteps + 16);  // as the engine does
  }
  std::vector<ForwardItem> items(kForks);
  auto step = [&] {
    for (int i = 0; i < kForks; ++i) {
      tokens[i].push_back(sampler.Sample(params, {&logits[static_cast<size_t>(i) * c.vocab_size],
                                                  static_cast<size_t>(c.vocab_size)},
                                         tokens[i], &rngs[i]));
      items[i] = {&forks[i], {&tokens[i].back(), 1}};
      ASSERT_TRUE(forks[i].PrepareAppend(1).ok());  // as the engine does
    }
    ASSERT_TRUE(t.Forward(items, logits.data()).ok());
  };
  for (int s = 0; s < 8; ++s) step();  // warm up (first page copies, pool slabs)

  const long before = g_allocations.load();
  for (int s = 0; s < kSteps; ++s) step();
  const long during = g_allocations.load() - before;
  EXPECT_EQ(during, 0) << during << " heap allocations in " << kSteps << " decode steps";
  EXPECT_EQ(forks[0].length(), static_cast<int>(prompt.size()) + 8 + kSteps);
}

}  // namespace
}  // namespace kvs
