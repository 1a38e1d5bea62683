// Page reference counts of the session store, and the change one mutation
// makes to them.
//
// PageRefTable is the store's in-memory view of what its records reference:
// per page its reference count (one per session or checkpoint record
// naming it) and encoded size; per record id the pages it references.
// RefCountChange is prepared alongside one RocksDB WriteBatch: the pages
// the batch writes, the records it sets or erases, and so the pages whose
// count drops to zero (the caller deletes them in the same batch). It is
// applied to the table only after the batch is durable, so a failed write
// leaves the counts as they were, consistent with the disk.
//
// Thread safety: none of its own. The store builds and applies a change
// under its mutex, the one that guards the table, and nothing else may
// change the table between the two.
#ifndef KVSESSION_CACHE_REF_COUNT_CHANGE_H_
#define KVSESSION_CACHE_REF_COUNT_CHANGE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "cache/page_hash.h"
#include "cache/record_validation.h"

namespace kvs {

struct PageRef {
  int64_t refs = 0;
  int64_t bytes = 0;  // encoded size (0 if unknown)
};

// The pages one stored record references, in order, as verified when it
// was written or loaded (shared: writers read it without copying).
struct RecordRefs {
  std::shared_ptr<const VerifiedPages> verified;
  bool corrupt = false;  // the record failed to load; its pages may be unknown
  const std::vector<PageHash>& pages() const { return verified->hashes; }
};
using RecordIndex = absl::flat_hash_map<std::string, RecordRefs>;

struct PageRefTable {
  // Every page some record references: its count and size.
  absl::flat_hash_map<PageHash, PageRef> pages;
  int64_t page_bytes = 0;       // sum of pages[].bytes
  int64_t page_references = 0;  // sum of pages[].refs
  // Every stored record (corrupt ones too) by id.
  RecordIndex sessions;
  RecordIndex checkpoints;
};

class RefCountChange {
 public:
  // `table` must outlive the change and not change until Apply.
  explicit RefCountChange(const PageRefTable* table) : table_(table) {}

  // Whether the page is held now or written by this change.
  bool Held(const PageHash& h) const;
  // Records that this change writes page `h` of `bytes` encoded bytes.
  void AddPage(const PageHash& h, int64_t bytes);
  // Sets (refs given) or erases (nullopt) the record `id` of `index`, one
  // of the table's indexes: the new record's pages gain a reference, the
  // replaced record's pages lose one.
  void SetRecord(RecordIndex* index, const std::string& id, std::optional<RecordRefs> refs);

  // The held pages whose count this change drops to zero.
  std::vector<PageHash> PagesToDelete() const;

  // Applies the change to `table` (the one given at construction).
  void Apply(PageRefTable* table);

 private:
  const PageRefTable* table_;
  absl::flat_hash_map<PageHash, PageRef> delta_;  // refs: change; bytes: of written pages
  absl::flat_hash_set<PageHash> written_;
  struct RecordChange {
    RecordIndex* index;
    std::string id;
    std::optional<RecordRefs> refs;
  };
  std::vector<RecordChange> records_;
};

}  // namespace kvs

#endif  // KVSESSION_CACHE_REF_COUNT_CHANGE_H_
