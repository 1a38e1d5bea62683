#include "cache/page_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include "absl/base/internal/raw_logging.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cache/slab_memory.h"

namespace kvs {
namespace {

// How long KeepWarm's thread waits, once pages are taken, before it refills.
constexpr absl::Duration kRefillDelay = absl::Milliseconds(50);

}  // namespace

PagePool::PagePool(const KvGeometry& geometry, int64_t max_pages)
    : geometry_(geometry),
      max_pages_(max_pages),
      slab_shape_(ChooseSlabShape(geometry.page_bytes(), max_pages)),
      pages_per_slab_(slab_shape_.pages) {
  slabs_.assign((max_pages + pages_per_slab_ - 1) / pages_per_slab_, nullptr);
  slab_bytes_.assign(slabs_.size(), 0);
}

PagePool::~PagePool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (warm_thread_.joinable()) warm_thread_.join();
  absl::MutexLock lock(&mu_);
  for (int64_t i = 0; i < n_slabs_; ++i) UnmapSlab(slabs_[i], slab_bytes_[i]);
}

void PagePool::SetReserved(int64_t pages) {
  absl::MutexLock lock(&mu_);
  const int64_t reserved = std::max<int64_t>(0, pages);
  if (reserved < reserved_) GiveRoomBack();
  reserved_ = reserved;
  reserve_next_freed_ = 0;
}

int64_t PagePool::room_given_back() const {
  absl::MutexLock lock(&mu_);
  return room_given_back_;
}

bool PagePool::AwaitRoomGivenBack(int64_t seen, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto given_back = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return room_given_back_ != seen; };
  ++room_waiters_;
  const bool given = mu_.AwaitWithDeadline(absl::Condition(&given_back), deadline);
  --room_waiters_;
  return given;
}

int PagePool::room_waiters() const {
  absl::MutexLock lock(&mu_);
  return room_waiters_;
}

void PagePool::NoteRoomMayBeMade() {
  absl::MutexLock lock(&mu_);
  GiveRoomBack();
}

void PagePool::SetRoomGivenBackCallback(std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  room_given_back_callback_ = std::move(callback);
}

void PagePool::GiveRoomBack() {
  ++room_given_back_;
  if (room_given_back_callback_) room_given_back_callback_();
}

void PagePool::ReserveNextFreed(int64_t pages) {
  absl::MutexLock lock(&mu_);
  reserve_next_freed_ = std::max<int64_t>(0, pages);
}

int64_t PagePool::reserved() const {
  absl::MutexLock lock(&mu_);
  return reserved_;
}

absl::StatusOr<PageId> PagePool::Allocate(bool from_reserve, PageOwner owner) {
  absl::MutexLock lock(&mu_);
  if (!from_reserve && in_use_ + reserved_ >= max_pages_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache is full: ", in_use_, " of ", max_pages_, " pages in use and ", reserved_,
        " set aside for running calls (", (max_pages_ * geometry_.page_bytes()) >> 20,
        " MiB, --kv-cache-mb)"));
  }
  return TakeFreePage(owner);
}

absl::StatusOr<PageId> PagePool::TakeFreePage(PageOwner owner) {
  if (free_.empty() && n_slabs_ == static_cast<int64_t>(slabs_.size()) && lru_head_ >= 0) {
    // Evict the least recently freed cached prefix page.
    PageId page = lru_head_;
    LruRemove(page);
    key_index_.erase(*keys_[page]);
    keys_[page].reset();
    free_.push_back(page);
  }
  if (free_.empty()) {
    if (n_slabs_ == static_cast<int64_t>(slabs_.size())) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "KV cache is full: all ", max_pages_, " pages (", max_pages_ * geometry_.page_tokens,
          " tokens, ", (max_pages_ * geometry_.page_bytes()) >> 20, " MiB) are in use"));
    }
    if (!MapNextSlab()) return absl::ResourceExhaustedError("cannot map KV cache memory");
  }
  PageId page = free_.back();
  free_.pop_back();
  ref_counts_[page] = 1;
  ++in_use_;
  ++references_;
  CountOwnerTaken(page, owner, /*first=*/true);
  return page;
}

absl::Status PagePool::TakePages(std::span<const std::optional<PageKey>> keys, std::vector<PageId>* pages,
                                 std::vector<bool>* found, int64_t* room_needed, PageOwner owner) {
  absl::MutexLock lock(&mu_);
  pages->clear();
  found->clear();
  // The room the call takes, counted before anything is taken.
  int64_t room = 0;
  absl::flat_hash_set<PageId> revived;
  for (const std::optional<PageKey>& key : keys) {
    auto it = key ? key_index_.find(*key) : key_index_.end();
    if (it == key_index_.end()) {
      ++room;
    } else if (ref_counts_[it->second] == 0 && revived.insert(it->second).second) {
      ++room;
    }
  }
  if (room_needed != nullptr) *room_needed = room;
  if (in_use_ + reserved_ + room > max_pages_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache is full: room for ", room, " more pages is needed; ", in_use_, " of ", max_pages_,
        " are in use and ", reserved_, " set aside for running calls (--kv-cache-mb)"));
  }
  // The slabs the fresh pages need, mapped before anything is taken (fresh
  // pages come from the free list, then new slabs, then evicted cached
  // pages: TakeFreePage's order), so a mapping the kernel refuses takes no
  // page: none to give back, no cached page moved in the eviction order
  // (slabs mapped before the refused one stay, as free pages).
  int64_t fresh = 0;
  for (const std::optional<PageKey>& key : keys) fresh += !(key && key_index_.contains(*key));
  while (static_cast<int64_t>(free_.size()) < fresh && n_slabs_ < static_cast<int64_t>(slabs_.size())) {
    if (!MapNextSlab()) return absl::ResourceExhaustedError("cannot map KV cache memory");
  }
  pages->assign(keys.size(), -1);
  found->assign(keys.size(), false);
  // Keys first, so no fresh page below evicts one of them.
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = keys[i] ? key_index_.find(*keys[i]) : key_index_.end();
    if (it == key_index_.end()) continue;
    const PageId page = it->second;
    TakeKeyed(page, owner);
    (*pages)[i] = page;
    (*found)[i] = true;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if ((*found)[i]) continue;
    absl::StatusOr<PageId> page = TakeFreePage(owner);
    if (!page.ok()) {
      // Not reached (the room was counted and the slabs mapped above); if
      // it were, what was taken goes back (revived pages as the newest).
      for (PageId p : *pages) {
        if (p >= 0) UndoTake(p, owner);
      }
      pages->clear();
      found->clear();
      return page.status();
    }
    (*pages)[i] = *page;
  }
  return absl::OkStatus();
}

bool PagePool::MapNextSlab() {
  const size_t bytes = SlabBytes(n_slabs_);
  uint8_t* memory = MapSlabMemory(bytes, /*populate=*/false);
  if (memory == nullptr) return false;
  InstallSlab(memory, bytes);
  return true;
}

void PagePool::TakeKeyed(PageId page, PageOwner owner) {
  const bool first = ref_counts_[page] == 0;
  if (first) {
    LruRemove(page);
    ++in_use_;
  } else if (ref_counts_[page] == 1) {
    ++shared_;
  }
  ++ref_counts_[page];
  ++references_;
  CountOwnerTaken(page, owner, first);
}

void PagePool::UndoTake(PageId page, PageOwner owner) {
  --references_;
  const int32_t left = --ref_counts_[page];
  CountOwnerDropped(page, owner, left == 0);
  if (left == 1) --shared_;
  if (left > 0) return;
  --in_use_;
  if (keys_[page]) {
    LruPushBack(page);
  } else {
    free_.push_back(page);
  }
}

size_t PagePool::SlabBytes(int64_t slab) const {
  const int64_t pages = std::min<int64_t>(pages_per_slab_, max_pages_ - slab * pages_per_slab_);
  if (pages >= pages_per_slab_) return slab_shape_.mapped_bytes;
  const size_t bytes = static_cast<size_t>(pages) * geometry_.page_bytes();
  return (bytes + kSlabHugePageBytes - 1) / kSlabHugePageBytes * kSlabHugePageBytes;
}

uint8_t* PagePool::MapSlabMemory(size_t bytes, bool populate) const {
  // Anonymous mappings: the kernel supplies zeroed memory lazily, so an
  // idle pool costs address space, not RSS.
  return MapSlab(bytes, populate);
}

void PagePool::InstallSlab(uint8_t* memory, size_t bytes) {
  if (n_slabs_ == static_cast<int64_t>(slabs_.size())) {
    UnmapSlab(memory, bytes);
    return;
  }
  // A mapping made (unlocked) for an earlier slab that lands on the last:
  // its whole huge pages past the last slab's pages go back.
  const size_t need = SlabBytes(n_slabs_);
  if (bytes > need) {
    UnmapSlab(memory + need, bytes - need);
    bytes = need;
  }
  slabs_[n_slabs_] = memory;
  slab_bytes_[n_slabs_] = bytes;
  const int64_t first = n_slabs_ * pages_per_slab_;
  const int64_t last = std::min<int64_t>(first + pages_per_slab_, max_pages_);
  ++n_slabs_;
  ref_counts_.resize(last, 0);
  owner_.resize(last, kNoPageOwner);
  keys_.resize(last);
  lru_prev_.resize(last, -1);
  lru_next_.resize(last, -1);
  for (int64_t p = last - 1; p >= first; --p) free_.push_back(static_cast<PageId>(p));
}

absl::Status PagePool::Prefault() {
  {
    absl::MutexLock lock(&mu_);
    warm_pages_ = max_pages_;
  }
  return WarmUpOnEveryCore();
}

absl::Status PagePool::KeepWarm(int64_t pages) {
  {
    absl::MutexLock lock(&mu_);
    warm_pages_ = std::clamp<int64_t>(pages, 0, max_pages_);
  }
  if (absl::Status s = WarmUpOnEveryCore(); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (!warm_thread_.joinable()) warm_thread_ = std::thread(&PagePool::WarmLoop, this);
  return absl::OkStatus();
}

bool PagePool::WarmingNeeded() const {
  return static_cast<int64_t>(free_.size()) + slabs_warming_ * pages_per_slab_ < warm_pages_ &&
         n_slabs_ + slabs_warming_ < static_cast<int64_t>(slabs_.size());
}

bool PagePool::WarmerHasWork() const {
  return stopping_ || (warming_pauses_ == 0 && WarmingNeeded());
}

PagePool::WarmingPause::WarmingPause(PagePool* pool) : pool_(pool) {
  absl::MutexLock lock(&pool_->mu_);
  ++pool_->warming_pauses_;
}

PagePool::WarmingPause::~WarmingPause() {
  absl::MutexLock lock(&pool_->mu_);
  --pool_->warming_pauses_;
}

absl::Status PagePool::WarmUp(bool background) {
  for (;;) {
    size_t bytes;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || !WarmingNeeded() || (background && warming_pauses_ > 0)) {
        return absl::OkStatus();
      }
      // The next slab's size (the largest any slab still to come needs:
      // InstallSlab gives back what the slab it lands on does not).
      bytes = SlabBytes(n_slabs_);
      ++slabs_warming_;
    }
    // Populating takes milliseconds per slab: Allocate and Release go on
    // meanwhile (an Allocate that finds no free page maps its own slab).
    uint8_t* memory = MapSlabMemory(bytes, /*populate=*/true);
    absl::MutexLock lock(&mu_);
    --slabs_warming_;
    if (memory == nullptr) return absl::ResourceExhaustedError("cannot map KV cache memory");
    InstallSlab(memory, bytes);
  }
}

absl::Status PagePool::WarmUpOnEveryCore() {
  std::array<absl::Status, kMaxFillThreads> status;
  const int threads = RunOnEveryCore([&](int t) { status[t] = WarmUp(/*background=*/false); });
  for (int t = 1; t < threads; ++t) status[0].Update(status[t]);
  return status[0];
}

void PagePool::WarmLoop() {
  // Only idle CPU time: a restore that takes warm pages runs on every core,
  // and refilling behind it must not slow it down.
  sched_param idle{};
  ::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &idle);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &PagePool::WarmerHasWork));
      // Let the call that took the pages finish first (measured: a refill
      // that starts as soon as a restore's copies end adds ~9 ms, a fifth,
      // to the restore's reply on two cores).
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), kRefillDelay);
      if (stopping_) return;
    }
    if (!WarmUp(/*background=*/true).ok()) {
      ABSL_RAW_LOG(WARNING, "KV cache: cannot map memory ahead of use; slabs are mapped on demand");
      absl::MutexLock lock(&mu_);
      warm_pages_ = 0;
    }
  }
}

void PagePool::AddRef(PageId page, PageOwner owner) {
  absl::MutexLock lock(&mu_);
  ABSL_RAW_CHECK(ref_counts_[page] > 0, "AddRef on a free page");
  if (++ref_counts_[page] == 2) ++shared_;
  ++references_;
  CountOwnerTaken(page, owner, /*first=*/false);
}

bool PagePool::Release(PageId page, PageOwner owner) {
  absl::MutexLock lock(&mu_);
  ABSL_RAW_CHECK(ref_counts_[page] > 0, "Release of a free page");
  --references_;
  const int32_t left = --ref_counts_[page];
  CountOwnerDropped(page, owner, left == 0);
  if (left == 1) --shared_;
  if (left == 0) {
    --in_use_;
    bool gave_room = false;
    if (reserve_next_freed_ > 0) {
      --reserve_next_freed_;
      ++reserved_;
    } else {
      gave_room = true;  // (a page into the reserve gives no room to others)
    }
    if (keys_[page]) {
      LruPushBack(page);
    } else {
      free_.push_back(page);
    }
    if (gave_room) GiveRoomBack();
    return gave_room;
  }
  return false;
}

bool PagePool::TakeSole(PageId page) {
  absl::MutexLock lock(&mu_);
  if (ref_counts_[page] != 1) return false;
  if (keys_[page]) {
    key_index_.erase(*keys_[page]);
    keys_[page].reset();
  }
  return true;
}

void PagePool::SetKey(PageId page, const PageKey& key) {
  absl::MutexLock lock(&mu_);
  ABSL_RAW_CHECK(ref_counts_[page] > 0, "SetKey on a free page");
  if (keys_[page] || key_index_.contains(key)) return;
  keys_[page] = key;
  key_index_.emplace(key, page);
}

std::optional<PageId> PagePool::LookupKey(const PageKey& key, bool from_reserve, PageOwner owner) {
  absl::MutexLock lock(&mu_);
  auto it = key_index_.find(key);
  if (it == key_index_.end()) return std::nullopt;
  const PageId page = it->second;
  if (ref_counts_[page] == 0 && !from_reserve && in_use_ + reserved_ >= max_pages_) return std::nullopt;
  TakeKeyed(page, owner);
  return page;
}

bool PagePool::KeyReferenced(const PageKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = key_index_.find(key);
  return it != key_index_.end() && ref_counts_[it->second] > 0;
}

bool PagePool::has_key(PageId page) const {
  absl::MutexLock lock(&mu_);
  return keys_[page].has_value();
}

void PagePool::AddHeld(PageOwner owner, int64_t delta) {
  ABSL_RAW_CHECK(owner >= 0, "a negative page owner");
  if (static_cast<size_t>(owner) >= held_by_.size()) held_by_.resize(static_cast<size_t>(owner) + 1, 0);
  held_by_[owner] += delta;
}

void PagePool::CountOwnerTaken(PageId page, PageOwner owner, bool first) {
  if (first) {
    owner_[page] = owner;
    AddHeld(owner, 1);
    return;
  }
  auto mixed = mixed_owners_.find(page);
  if (mixed == mixed_owners_.end()) {
    if (owner_[page] == owner) return;
    // A second owner: the references before this one are all owner_[page]'s.
    mixed_owners_[page] = {{owner_[page], ref_counts_[page] - 1}, {owner, 1}};
    AddHeld(owner, 1);
    return;
  }
  for (auto& [o, refs] : mixed->second) {
    if (o == owner) {
      ++refs;
      return;
    }
  }
  mixed->second.emplace_back(owner, 1);
  AddHeld(owner, 1);
}

void PagePool::CountOwnerDropped(PageId page, PageOwner owner, bool last) {
  auto mixed = mixed_owners_.find(page);
  if (mixed == mixed_owners_.end()) {
    ABSL_RAW_CHECK(owner_[page] == owner, "a page reference dropped for an owner it was not taken for");
    if (last) AddHeld(owner, -1);
    return;
  }
  std::vector<std::pair<PageOwner, int32_t>>& owners = mixed->second;
  auto it = std::find_if(owners.begin(), owners.end(), [owner](const auto& o) { return o.first == owner; });
  ABSL_RAW_CHECK(it != owners.end(), "a page reference dropped for an owner it was not taken for");
  if (--it->second == 0) {
    AddHeld(owner, -1);
    owners.erase(it);
  }
  if (owners.size() == 1) {  // (a mixed page has two references or more, so `last` is false)
    owner_[page] = owners.front().first;
    mixed_owners_.erase(mixed);
  }
}

int64_t PagePool::PagesHeldBy(PageOwner owner) const {
  absl::MutexLock lock(&mu_);
  return owner >= 0 && static_cast<size_t>(owner) < held_by_.size() ? held_by_[owner] : 0;
}

void PagePool::LruRemove(PageId page) {
  const PageId prev = lru_prev_[page], next = lru_next_[page];
  (prev >= 0 ? lru_next_[prev] : lru_head_) = next;
  (next >= 0 ? lru_prev_[next] : lru_tail_) = prev;
  lru_prev_[page] = lru_next_[page] = -1;
  --cached_;
}

void PagePool::LruPushBack(PageId page) {
  lru_prev_[page] = lru_tail_;
  lru_next_[page] = -1;
  (lru_tail_ >= 0 ? lru_next_[lru_tail_] : lru_head_) = page;
  lru_tail_ = page;
  ++cached_;
}

int PagePool::ref_count(PageId page) const {
  absl::MutexLock lock(&mu_);
  return ref_counts_[page];
}

PagePoolStats PagePool::Stats() const {
  absl::MutexLock lock(&mu_);
  PagePoolStats s;
  s.page_bytes = static_cast<int64_t>(geometry_.page_bytes());
  s.max_pages = max_pages_;
  s.pages_in_use = in_use_;
  s.pages_shared = shared_;
  s.page_references = references_;
  s.pages_cached = cached_;
  s.pages_reserved = reserved_;
  s.pages_mapped = static_cast<int64_t>(ref_counts_.size());
  s.pages_warm_target = warm_pages_;
  return s;
}

}  // namespace kvs
