#include "service/session_persistence.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/page_codec.h"
#include "service/session_io_metrics.h"

namespace kvs {

absl::StatusOr<PageEncoding> SessionPersistence::EncodeResidentPage(const Session& s, int kv_length,
                                                                   int i) const {
  if (!s.kv || i >= s.kv->num_pages()) {
    return absl::DataLossError(absl::StrCat("session ", s.id, ": page ", i, " is not in RAM"));
  }
  return EncodePageParts(context_->geometry, pool_->data(s.kv->page_table()[i]),
                    PageTokensAt(context_->geometry, kv_length, i));
}

namespace {

// Threads a restore reads pages on: the cores, at most 4.
int RestoreThreads() {
  static const int threads =
      static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  return threads;
}

// Observes one store write of session records (SessionIoMetrics).
template <class Write>
absl::Status Timed(const Write& write) {
  const SessionIoMetrics* m = GetSessionIoMetrics();
  if (m == nullptr) return write();
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = write();
  m->persist_seconds->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!status.ok()) m->persist_failures->Add();
  return status;
}

}  // namespace

absl::Status SessionPersistence::Write(const SessionRecord& record, const Session& s) const {
  return Timed([&] {
    return store_->PutSession(record, [&](int i) { return EncodeResidentPage(s, record.kv_length(), i); });
  });
}

absl::Status SessionPersistence::WriteBranches(
    std::span<const SessionRecord> records,
    std::span<const std::shared_ptr<Session>> branches) const {
  // The parent's pages are normally stored already (it is persisted
  // whenever idle), so the branches' records only add references; a parent
  // whose last write failed has pages the store lacks, written here once.
  return Timed([&] {
    return store_->PutSessions(records, [&](int r, int i) {
      return EncodeResidentPage(*branches[r], records[r].kv_length(), i);
    });
  });
}

absl::StatusOr<KvSequence> SessionPersistence::LoadKv(const Session& s, int64_t* room_seen) const {
  if (room_seen != nullptr) *room_seen = -1;
  const KvGeometry& g = context_->geometry;
  const int t = g.page_tokens;
  const int kv_length = s.persisted_kv_length;
  const int n_pages = (kv_length + t - 1) / t;
  if (static_cast<int>(s.persisted_page_hashes.size()) != n_pages) {
    return absl::DataLossError(absl::StrCat("session ", s.id, " record lists ",
                                            s.persisted_page_hashes.size(), " pages for ",
                                            kv_length, " KV positions"));
  }
  if (n_pages > pool_->max_pages()) {
    return absl::ResourceExhaustedError(absl::StrCat("the session's KV takes ", n_pages,
                                                     " pages; this server's KV cache holds ",
                                                     pool_->max_pages(), " (--kv-cache-mb)"));
  }
  // Read before looking for room: room given back from here on wakes a
  // caller that waits (room_seen).
  const int64_t room_before = pool_->room_given_back();
  // Room first, taking nothing: a load that cannot fit gives nothing back,
  // so two loads waiting for room do not wake each other in turn. Pages
  // another sequence holds under the same key are shared and take none.
  std::vector<std::optional<PageKey>> keys(n_pages);
  int64_t to_take = 0;
  for (int i = 0; i < n_pages; ++i) {
    if (PageTokensAt(g, kv_length, i) == t) keys[i] = s.persisted_page_hashes[i].bytes;
    to_take += !(keys[i] && pool_->KeyReferenced(*keys[i]));
  }
  if (to_take > 0 && !room_->MakeRoom(to_take)) {
    if (room_seen != nullptr) *room_seen = room_before;
    const PagePoolStats st = pool_->Stats();
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache is full: loading the session takes ", to_take, " pages; ", st.pages_in_use, " of ",
        st.max_pages, " are in use and ", st.pages_reserved, " set aside for running calls (--kv-cache-mb)"));
  }
  const auto start = std::chrono::steady_clock::now();
  int64_t pages_read = 0;
  // The pool's warm pages are taken now; refilling waits for the copies.
  PagePool::WarmingPause pause(pool_);
  // Every page in one step, all or none (full pages already in RAM under
  // their key are shared or revived), so a load that others beat to the
  // room since the check takes nothing and gives nothing back either.
  // The room the take needs may exceed the check's count: a page counted
  // as shared may have lost its other holder since (MakeRoom may have
  // evicted it), so a retry asks for what the take counted.
  std::vector<PageId> pages;
  std::vector<bool> found;
  int64_t needed = to_take;
  const PageOwner owner = owners_->Of(s.owner);
  absl::Status took = pool_->TakePages(keys, &pages, &found, &needed, owner);
  if (absl::IsResourceExhausted(took) && room_->MakeRoom(needed)) {
    took = pool_->TakePages(keys, &pages, &found, &needed, owner);
  }
  if (!took.ok()) {
    // No room, or no memory to map: either may come back as others give
    // room back.
    if (room_seen != nullptr && absl::IsResourceExhausted(took)) *room_seen = room_before;
    return absl::Status(took.code(), absl::StrCat("loading the session: ", took.message()));
  }
  auto give_back = [&] {
    for (PageId p : pages) pool_->Release(p, owner);
  };
  // Then every page to read in one ReadPages: batched, parallel, straight
  // into the pool pages, each checksum checked once.
  std::vector<SessionStore::PageRead> reads;
  std::vector<int> read_index;  // page index of reads[k]
  for (int i = 0; i < n_pages; ++i) {
    if (found[i]) continue;
    reads.push_back({s.persisted_page_hashes[i], PageTokensAt(g, kv_length, i), pool_->data(pages[i])});
    read_index.push_back(i);
  }
  pages_read = static_cast<int64_t>(reads.size());
  size_t failed = 0;
  if (absl::Status read = store_->ReadPages(reads, g, RestoreThreads(), &failed); !read.ok()) {
    give_back();
    // DATA_LOSS says so; an I/O error (INTERNAL) or a reopening store
    // (UNAVAILABLE) keeps its code: the session is not lost.
    return absl::Status(read.code(), absl::StrCat("session ", s.id, ": KV page ", read_index[failed], " (",
                                                  reads[failed].hash.hex(), ")",
                                                  absl::IsDataLoss(read) ? " is corrupt or missing" : " cannot be read",
                                                  ": ", read.message()));
  }
  for (size_t k = 0; k < reads.size(); ++k) {
    if (reads[k].n_tokens == t) pool_->SetKey(pages[read_index[k]], reads[k].hash.bytes);
  }
  KvSequence kv(pool_, owner);
  kv.Adopt(std::move(pages), kv_length);
  if (const SessionIoMetrics* m = GetSessionIoMetrics()) {
    m->restores->Add();
    m->restored_bytes->Add(pages_read * m->page_bytes);
    m->restore_seconds->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return kv;
}

}  // namespace kvs
