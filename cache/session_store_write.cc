// SessionStore's mutations (session_store.h): PutSession(s), PutCheckpoint,
// the deletes and page staging, each one RocksDB batch with its page files,
// and Write/Commit, which every mutation ends with.
#include "cache/session_store.h"

#include <optional>
#include <string_view>
#include <utility>

#include "absl/base/internal/raw_logging.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

#include "cache/record_codec.h"
#include "cache/session_store_internal.h"

namespace kvs {

using session_store_internal::FromRocks;

namespace {

// Bytes a write batch of `v`'s page entries (a header each; the pages
// themselves go to files) and a record value of `value_bytes` can reach:
// reserved up front, the batch is built in one allocation.
size_t BatchBytesAtMost(const VerifiedPages& v, size_t value_bytes) {
  constexpr size_t kPerEntry = 64;  // tag, column family, varint lengths, key
  return v.hashes.size() * (kPageHeaderBytes + kPerEntry) + value_bytes + kPerEntry;
}

}  // namespace

absl::Status SessionStore::Write(rocksdb::WriteBatch* batch) {
  if (absl::Status floor = CheckFreeSpace(*batch); !floor.ok()) return floor;
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync_writes;
  absl::Status s = FromRocks(db_->Write(write_options, batch), "session store write");
  if (!s.ok()) write_failed_ = true;
  if (absl::IsResourceExhausted(s)) {
    return absl::ResourceExhaustedError(absl::StrCat("disk full: ", FreeSpaceText(), ": ", s.message()));
  }
  return s;
}

absl::Status SessionStore::Commit(RefCountChange& change, rocksdb::WriteBatch* batch,
                                  WriteStats* stats) {
  const std::vector<PageHash> freed = change.PagesToDelete();
  for (const PageHash& hash : freed) {
    if (rocksdb::Status del = batch->Delete(pages_cf_, rocksdb::Slice(hash.view())); !del.ok()) {
      return FromRocks(del, absl::StrCat("batch delete of page ", hash.hex()));
    }
  }
  if (absl::Status s = Write(batch); !s.ok()) return s;
  change.Apply(&table_);
  if (stats != nullptr) stats->pages_deleted += static_cast<int64_t>(freed.size());
  // After the batch: a crash before these deletes leaves files no record
  // references, which LoadAll collects.
  for (const PageHash& hash : freed) {
    if (absl::Status removed = page_files_.Remove(hash); !removed.ok()) {
      ABSL_RAW_LOG(WARNING, "session store: %s (collected at the next start)",
                   removed.ToString().c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status SessionStore::AddPage(const PageHash& hash, const PageEncoding& encoded,
                                   rocksdb::WriteBatch* batch, MutationFiles* files) {
  const std::string_view header = encoded.header();
  if (page_files_.Holds(hash, header, encoded.size())) {
    // Staged (StagePage): whole, and of this very encoding.
    ++files->staged_used;
  } else {
    // The floor, before the first byte of the mutation reaches the disk.
    if (files->written.empty()) {
      if (absl::Status floor = CheckFloor(); !floor.ok()) return floor;
    }
    if (absl::Status s = page_files_.Write(hash, header, encoded.payload(), options_.sync_writes);
        !s.ok()) {
      if (absl::IsResourceExhausted(s)) {
        return absl::ResourceExhaustedError(absl::StrCat("disk full: ", FreeSpaceText(), ": ", s.message()));
      }
      return s;
    }
    files->written.push_back(hash);
  }
  return FromRocks(batch->Put(pages_cf_, rocksdb::Slice(hash.view()),
                              rocksdb::Slice(header.data(), header.size())),
                   absl::StrCat("batch page ", hash.hex()));
}

absl::Status SessionStore::SettlePageFiles(absl::Status built, const MutationFiles& files) {
  const bool touched = !files.written.empty() || files.staged_used > 0;
  if (built.ok() && touched && options_.sync_writes) built = page_files_.SyncDir();
  if (!built.ok()) {
    // No record references them: nothing was committed.
    for (const PageHash& hash : files.written) page_files_.Remove(hash).IgnoreError();
  }
  return built;
}

absl::StatusOr<bool> SessionStore::StagePage(
    const PageHash& hash, size_t encoded_bytes,
    absl::FunctionRef<absl::StatusOr<PageEncoding>()> encode) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (table_.pages.contains(hash)) return false;
  }
  if (absl::Status floor = CheckFloor(); !floor.ok()) return floor;
  absl::StatusOr<PageEncoding> encoded = encode();
  if (!encoded.ok()) return encoded.status();
  if (encoded->size() != encoded_bytes || encoded->header().size() != kPageHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("staged page ", hash.hex(), " is ",
                                                   encoded->size(), " bytes, not ", encoded_bytes));
  }
  if (page_files_.Holds(hash, encoded->header(), encoded->size())) return false;
  // Written outside the lock, published under it: a mutation may have
  // committed the page meanwhile, from bytes of its own (an import made on
  // another CPU kind rounds differently), and its file must stay the one
  // its entry describes (page_files.h: one writer of a page at a time).
  absl::StatusOr<std::string> temporary =
      page_files_.WriteTemporary(hash, encoded->header(), encoded->payload(), options_.sync_writes);
  if (!temporary.ok()) {
    if (absl::IsResourceExhausted(temporary.status())) {
      return absl::ResourceExhaustedError(
          absl::StrCat("disk full: ", FreeSpaceText(), ": ", temporary.status().message()));
    }
    return temporary.status();
  }
  absl::MutexLock lock(&mu_);
  if (table_.pages.contains(hash)) {
    page_files_.DiscardTemporary(*temporary);
    return false;
  }
  if (absl::Status s = page_files_.Publish(*temporary, hash); !s.ok()) return s;
  return true;
}

void SessionStore::DiscardStaged(std::span<const PageHash> hashes) {
  // Under the lock: a mutation checks a staged file and commits its entry
  // in one critical section, so a file is either deleted before a
  // mutation looks for it (which then writes its own) or held after.
  absl::MutexLock lock(&mu_);
  for (const PageHash& hash : hashes) {
    if (!table_.pages.contains(hash)) page_files_.Remove(hash).IgnoreError();
  }
}

std::shared_ptr<const VerifiedPages> SessionStore::ReferenceFor(const std::string& id,
                                                                const std::string& parent) const {
  for (const std::string* key : {&id, &parent}) {
    if (key->empty()) continue;
    auto it = table_.sessions.find(*key);
    if (it != table_.sessions.end() && !it->second.corrupt) return it->second.verified;
  }
  return nullptr;
}

absl::Status SessionStore::PutSession(
    const SessionRecord& record,
    absl::FunctionRef<absl::StatusOr<PageEncoding>(int page_index)> encode_missing,
    WriteStats* stats) {
  return PutSessions(
      std::span<const SessionRecord>(&record, 1),
      [&](int, int page_index) { return encode_missing(page_index); }, stats);
}

absl::Status SessionStore::PutSessions(
    std::span<const SessionRecord> records,
    absl::FunctionRef<absl::StatusOr<PageEncoding>(int record_index, int page_index)>
        encode_missing,
    WriteStats* stats) {
  absl::flat_hash_set<std::string_view> ids;
  for (const SessionRecord& record : records) {
    if (record.id().empty()) return absl::InvalidArgumentError("session record without an id");
    if (!ids.insert(record.id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("session '", record.id(), "' appears twice in one write"));
    }
  }
  // What each record is verified against, then everything that needs no
  // lock: checks, hashes of the pages the references do not vouch for,
  // serialisation. A reference replaced meanwhile is still a verified
  // record, which is all the check needs.
  std::vector<std::shared_ptr<const VerifiedPages>> references;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const SessionRecord& record : records) {
      references.push_back(ReferenceFor(record.id(), record.parent_session_id()));
    }
  }
  WriteStats written;
  std::vector<std::shared_ptr<const VerifiedPages>> verified;
  std::vector<std::string> values;
  for (size_t r = 0; r < records.size(); ++r) {
    absl::StatusOr<VerifiedPages> v =
        VerifySessionRecord(records[r], references[r].get(), &written.pages_hashed);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("session '", records[r].id(), "': ", std::string(v.status().message())));
    }
    verified.push_back(std::make_shared<const VerifiedPages>(*std::move(v)));
    values.push_back(EncodeRecordValue(records[r]));
  }

  size_t batch_bytes = 0;
  for (size_t r = 0; r < records.size(); ++r) batch_bytes += BatchBytesAtMost(*verified[r], values[r].size());
  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  if (absl::Status s = RecoverIfWriteFailed(); !s.ok()) return s;
  rocksdb::WriteBatch batch(batch_bytes);
  RefCountChange change(&table_);
  MutationFiles new_files;
  absl::Status built = [&]() -> absl::Status {
    for (size_t r = 0; r < records.size(); ++r) {
      const KvGeometry& g = verified[r]->geometry;
      const std::vector<PageHash>& hashes = verified[r]->hashes;
      for (size_t i = 0; i < hashes.size(); ++i) {
        const PageHash& hash = hashes[i];
        if (change.Held(hash)) {
          ++written.pages_reused;
          continue;
        }
        const int page_index = static_cast<int>(i);
        absl::StatusOr<PageEncoding> page = encode_missing(static_cast<int>(r), page_index);
        if (!page.ok()) return page.status();
        const int n_tokens = PageTokensAt(g, records[r].kv_length(), page_index);
        absl::StatusOr<EncodedPageInfo> info = ReadPageHeaderOfParts(*page);
        if (!info.ok() || !(info->geometry == g) || info->n_tokens != n_tokens) {
          return absl::InvalidArgumentError(absl::StrCat(
              "session '", records[r].id(), "': encode_missing(", page_index,
              ") is not a page of ", DescribeGeometry(g), " with ", n_tokens, " tokens",
              info.ok() ? "" : absl::StrCat(": ", std::string(info.status().message()))));
        }
        if (absl::Status added = AddPage(hash, *page, &batch, &new_files); !added.ok()) return added;
        change.AddPage(hash, static_cast<int64_t>(page->size()));
        ++written.pages_written;
        written.bytes_written += static_cast<int64_t>(page->size());
      }
      batch.Put(sessions_cf_, records[r].id(), values[r]);
      written.bytes_written += static_cast<int64_t>(values[r].size());
      change.SetRecord(&table_.sessions, records[r].id(), RecordRefs{.verified = verified[r]});
    }
    return absl::OkStatus();
  }();
  if (absl::Status s = SettlePageFiles(std::move(built), new_files); !s.ok()) return s;
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

absl::Status SessionStore::DeleteRecord(rocksdb::ColumnFamilyHandle* SessionStore::*family,
                                        RecordIndex* index, const std::string& kind,
                                        const std::string& id, WriteStats* stats) {
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  // Recovery first: after a write whose outcome was uncertain, the record
  // may be in the reopened store though the index never had it, and a
  // delete answered NOT_FOUND from the old index would leave it to come
  // back after a restart.
  if (absl::Status s = RecoverIfWriteFailed(/*frees_space=*/true); !s.ok()) return s;
  if (!index->contains(id)) return absl::NotFoundError(absl::StrCat(kind, " '", id, "' not found"));
  rocksdb::WriteBatch batch;
  // The handle is read after recovery, which may have reopened the database.
  batch.Delete(this->*family, id);
  RefCountChange change(&table_);
  change.SetRecord(index, id, std::nullopt);
  WriteStats written;
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

absl::Status SessionStore::DeleteSession(const std::string& id, WriteStats* stats) {
  absl::MutexLock lock(&mu_);
  return DeleteRecord(&SessionStore::sessions_cf_, &table_.sessions, "session", id, stats);
}

absl::Status SessionStore::DeleteCheckpoint(const std::string& id, WriteStats* stats) {
  absl::MutexLock lock(&mu_);
  return DeleteRecord(&SessionStore::checkpoints_cf_, &table_.checkpoints, "checkpoint", id, stats);
}

absl::Status SessionStore::PutCheckpoint(const CheckpointRecord& record, WriteStats* stats) {
  return PutCheckpoint(
      record,
      [&](int page_index) -> absl::StatusOr<std::string> {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint '", record.id(), "' references page ",
            PageHash::FromBytes(record.session().page_hashes(page_index))->hex(),
            " the store does not hold"));
      },
      stats);
}

absl::Status SessionStore::PutCheckpoint(
    const CheckpointRecord& record,
    absl::FunctionRef<absl::StatusOr<PageEncoding>(int page_index)> encode_missing,
    WriteStats* stats) {
  if (record.id().empty()) return absl::InvalidArgumentError("checkpoint record without an id");
  std::shared_ptr<const VerifiedPages> reference;
  {
    absl::ReaderMutexLock lock(&mu_);
    reference = ReferenceFor(record.session().id(), "");
  }
  WriteStats written;
  absl::StatusOr<VerifiedPages> verified =
      VerifySessionRecord(record.session(), reference.get(), &written.pages_hashed);
  if (!verified.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint '", record.id(), "': ",
                                                   std::string(verified.status().message())));
  }
  const std::string value = EncodeRecordValue(record);

  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireLoaded(); !s.ok()) return s;
  if (absl::Status s = RecoverIfWriteFailed(); !s.ok()) return s;
  rocksdb::WriteBatch batch(BatchBytesAtMost(*verified, value.size()));
  RefCountChange change(&table_);
  const KvGeometry& g = verified->geometry;
  MutationFiles new_files;
  absl::Status built = [&]() -> absl::Status {
    for (size_t i = 0; i < verified->hashes.size(); ++i) {
      const PageHash& hash = verified->hashes[i];
      if (change.Held(hash)) {
        ++written.pages_reused;
        continue;
      }
      const int page_index = static_cast<int>(i);
      absl::StatusOr<PageEncoding> page = encode_missing(page_index);
      if (!page.ok()) return page.status();
      const int n_tokens = PageTokensAt(g, record.session().kv_length(), page_index);
      absl::StatusOr<EncodedPageInfo> info = ReadPageHeaderOfParts(*page);
      if (!info.ok() || !(info->geometry == g) || info->n_tokens != n_tokens) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint '", record.id(), "': encode_missing(", page_index, ") is not a page of ",
            DescribeGeometry(g), " with ", n_tokens, " tokens"));
      }
      if (absl::Status added = AddPage(hash, *page, &batch, &new_files); !added.ok()) return added;
      change.AddPage(hash, static_cast<int64_t>(page->size()));
      ++written.pages_written;
      written.bytes_written += static_cast<int64_t>(page->size());
    }
    return absl::OkStatus();
  }();
  if (absl::Status s = SettlePageFiles(std::move(built), new_files); !s.ok()) return s;
  batch.Put(checkpoints_cf_, record.id(), value);
  written.bytes_written += static_cast<int64_t>(value.size());
  change.SetRecord(&table_.checkpoints, record.id(),
                   RecordRefs{.verified = std::make_shared<const VerifiedPages>(*std::move(verified))});
  if (absl::Status s = Commit(change, &batch, &written); !s.ok()) return s;
  if (stats != nullptr) *stats = written;
  return absl::OkStatus();
}

}  // namespace kvs
