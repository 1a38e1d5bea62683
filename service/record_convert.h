// Conversions between the service's Session and the stored records
// (cache/session_record.proto). The one place where a session becomes a
// record and back; the API's messages are converted in proto_convert.h.
//
// Pure functions of their arguments; thread-safe. The caller holds whatever
// lock protects the session it reads (the registry's, see session.h).
#ifndef KVSESSION_SERVICE_RECORD_CONVERT_H_
#define KVSESSION_SERVICE_RECORD_CONVERT_H_

#include <memory>
#include <string>

#include "cache/kv_geometry.h"
#include "cache/session_record.pb.h"
#include "model/sampler.h"
#include "service/session.h"

namespace kvs {

// What every record of this server carries besides the session itself.
struct RecordContext {
  std::string model_fingerprint;  // SHA-256 of the GGUF file (32 bytes)
  std::string model_name;         // for messages only
  KvGeometry geometry;
};

SamplingRecord ToRecord(const SamplingParams& p);
SamplingParams FromRecord(const SamplingRecord& r);

// The record of `session` at version session.version + 1. A resident
// session's page list is its full-page hashes plus the hash of the partial
// last page (one SHA-256 of at most T tokens); a session whose KV is on
// disk keeps the page list it was loaded with.
SessionRecord BuildSessionRecord(const Session& session, const RecordContext& context);

// The tenant a record belongs to: its owner, or the default tenant for a
// record without one (written before ownership existed, or by a server
// without API keys).
std::string RecordOwner(const SessionRecord& record);

// A non-resident session for `record`. A record made with another model or
// KV geometry gives a session whose `foreign` status (FAILED_PRECONDITION,
// naming both) answers every use.
std::shared_ptr<Session> SessionFromRecord(const SessionRecord& record,
                                           const RecordContext& context);

// At most what writing `record` adds to the store in pages, beyond the
// record `session` was last persisted as: the record's pages from the first
// whose hash differs from the stored list's (hashes chain, so every later
// one differs too), at a full page's encoded size each. An upper bound:
// pages another record holds are not written again.
int64_t UnstoredPageBytes(const SessionRecord& record, const Session& session,
                          const KvGeometry& geometry);

// Marks `session` as holding exactly what `record` (just written) holds.
// For a session in the registry, call SessionRegistry::MarkPersisted, which
// also counts the record for its owner's store bytes.
void MarkPersisted(const SessionRecord& record, Session* session);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_RECORD_CONVERT_H_
