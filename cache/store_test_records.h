// Test-only: the session records the store tests write. A record of
// `n_tokens` tokens first, first + 1, ... of model "model-a" with KV for
// the first `kv_length` of them (all if negative), geometry `g`, and the
// page hashes the store requires (FillPageHashes).
#ifndef KVSESSION_CACHE_STORE_TEST_RECORDS_H_
#define KVSESSION_CACHE_STORE_TEST_RECORDS_H_

#include <string>

#include "cache/kv_geometry.h"
#include "cache/page_hash.h"
#include "cache/record_validation.h"
#include "cache/session_record.pb.h"
#include "gtest/gtest.h"

namespace kvs {

inline SessionRecord TestSessionRecord(const std::string& id, const KvGeometry& g, int n_tokens,
                                       int32_t first, int kv_length = -1) {
  SessionRecord r;
  r.set_id(id);
  r.set_model_fingerprint("model-a");
  *r.mutable_geometry() = ToGeometryRecord(g);
  for (int i = 0; i < n_tokens; ++i) r.add_tokens(first + i);
  r.set_kv_length(kv_length < 0 ? n_tokens : kv_length);
  EXPECT_TRUE(FillPageHashes(&r).ok());
  return r;
}

// The hash of page `page` of `r`.
inline PageHash PageHashOf(const SessionRecord& r, int page) {
  return *PageHash::FromBytes(r.page_hashes(page));
}

}  // namespace kvs

#endif  // KVSESSION_CACHE_STORE_TEST_RECORDS_H_
