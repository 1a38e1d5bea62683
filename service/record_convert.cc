#include "service/record_convert.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cache/session_store.h"

namespace kvs {
namespace {

PageHash HashFromBytes(const std::string& b) {
  return PageHash::FromBytes(b).value_or(PageHash{});  // the store checks record hashes
}

std::string ShortFingerprint(const std::string& fp) {
  return absl::BytesToHexString(fp.substr(0, 6));
}

// A stored record's dtype field, named ("dtype 7" if this build knows no such type).
std::string StoredDtypeName(int32_t dtype) {
  return dtype >= 0 && KvDtypeKnown(static_cast<uint32_t>(dtype)) ? KvDtypeName(static_cast<KvDtype>(dtype))
                                                                  : absl::StrCat(dtype);
}

void AddHash(const PageHash& h, SessionRecord* r) {
  r->add_page_hashes(std::string(h.bytes.begin(), h.bytes.end()));
}

}  // namespace

SamplingRecord ToRecord(const SamplingParams& p) {
  SamplingRecord r;
  r.set_temperature(p.temperature);
  r.set_top_k(p.top_k);
  r.set_top_p(p.top_p);
  r.set_min_p(p.min_p);
  r.set_repetition_penalty(p.repetition_penalty);
  r.set_repetition_last_n(p.repetition_last_n);
  r.set_seed(p.seed);
  for (const auto& [id, bias] : p.logit_bias) (*r.mutable_logit_bias())[id] = bias;
  return r;
}

SamplingParams FromRecord(const SamplingRecord& r) {
  SamplingParams p;
  p.temperature = r.temperature();
  p.top_k = r.top_k();
  p.top_p = r.top_p();
  p.min_p = r.min_p();
  p.repetition_penalty = r.repetition_penalty();
  p.repetition_last_n = r.repetition_last_n();
  p.seed = r.seed();
  p.logit_bias.assign(r.logit_bias().begin(), r.logit_bias().end());
  std::sort(p.logit_bias.begin(), p.logit_bias.end());
  return p;
}

SessionRecord BuildSessionRecord(const Session& s, const RecordContext& context) {
  SessionRecord r;
  r.set_id(s.id);
  r.set_model_fingerprint(context.model_fingerprint);
  *r.mutable_geometry() = ToGeometryRecord(context.geometry);
  r.mutable_tokens()->Add(s.tokens.begin(), s.tokens.end());
  *r.mutable_sampling() = ToRecord(s.sampling);
  for (uint64_t w : s.rng.state()) r.add_rng_state(w);
  for (const auto& [k, v] : s.labels) (*r.mutable_labels())[k] = v;
  r.set_create_time_us(s.create_time_us);
  r.set_update_time_us(s.update_time_us);
  r.set_parent_session_id(s.parent_session_id);
  r.set_checkpoint_id(s.checkpoint_id);
  r.set_owner(s.owner);
  r.set_shared_prefix_chain(s.shared_prefix_chain);
  r.set_version(s.version + 1);
  r.set_chat(s.chat.started);
  r.set_chat_turn_open(s.chat.turn_open);
  r.set_context_policy(static_cast<int32_t>(s.context_policy));
  r.set_keep_tokens(s.keep_tokens);
  r.set_tokens_dropped(s.tokens_dropped);
  if (s.slide_salt) {
    r.set_slide_salt(std::string(s.slide_salt->hash.view()));
    r.set_slide_salt_page(s.slide_salt->page);
  }
  if (!s.kv) {
    r.set_kv_length(s.persisted_kv_length);
    for (const PageHash& h : s.persisted_page_hashes) AddHash(h, &r);
    return r;
  }
  const int kv_length = s.kv->length();
  const int t = context.geometry.page_tokens;
  r.set_kv_length(kv_length);
  const int full = kv_length / t;
  for (int i = 0; i < full; ++i) AddHash(s.page_hashes->hashes()[i], &r);
  if (kv_length % t != 0) {
    AddHash(s.page_hashes->NextPageHash(
                std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(full) * t, kv_length - full * t)),
            &r);
  }
  return r;
}

std::string RecordOwner(const SessionRecord& record) {
  return record.owner().empty() ? std::string(kDefaultTenant) : record.owner();
}

std::shared_ptr<Session> SessionFromRecord(const SessionRecord& r, const RecordContext& context) {
  auto s = std::make_shared<Session>();
  s->id = r.id();
  s->tokens.assign(r.tokens().begin(), r.tokens().end());
  s->sampling = FromRecord(r.sampling());
  if (r.rng_state_size() == 4) {
    s->rng.set_state({r.rng_state(0), r.rng_state(1), r.rng_state(2), r.rng_state(3)});
  }
  s->labels = std::map<std::string, std::string>(r.labels().begin(), r.labels().end());
  s->create_time_us = r.create_time_us();
  s->update_time_us = r.update_time_us();
  // Last used, as far as the store knows: when its state last changed
  // (session_expiry.h counts idle time from here after a restart).
  s->last_used_us = r.update_time_us();
  s->parent_session_id = r.parent_session_id();
  s->checkpoint_id = r.checkpoint_id();
  // Records written before ownership existed belong to the default tenant.
  s->owner = RecordOwner(r);
  s->shared_prefix_chain = r.shared_prefix_chain();
  s->version = r.version();
  s->chat = ChatState{.started = r.chat(), .turn_open = r.chat_turn_open()};
  s->context_policy = r.context_policy() == static_cast<int32_t>(ContextPolicy::kSlide)
                          ? ContextPolicy::kSlide
                          : ContextPolicy::kError;
  s->keep_tokens = r.keep_tokens();
  s->tokens_dropped = r.tokens_dropped();
  if (!r.slide_salt().empty()) {  // the store checked it (RecordSalt)
    s->slide_salt = ChainSalt{r.slide_salt_page(), HashFromBytes(r.slide_salt())};
  }
  s->persisted_kv_length = r.kv_length();
  s->persisted_record_bytes = static_cast<int64_t>(r.ByteSizeLong());
  for (const std::string& h : r.page_hashes()) s->persisted_page_hashes.push_back(HashFromBytes(h));
  const KvGeometry& g = context.geometry;
  if (r.model_fingerprint() != context.model_fingerprint) {
    s->foreign = absl::FailedPreconditionError(absl::StrCat(
        "session ", r.id(), " was created with another model (fingerprint ",
        ShortFingerprint(r.model_fingerprint()), "...; this server runs ", context.model_name,
        ", fingerprint ", ShortFingerprint(context.model_fingerprint), "...)"));
  } else if (absl::StatusOr<KvGeometry> rg = FromGeometryRecord(r.geometry()); !rg.ok() || !(*rg == g)) {
    s->foreign = absl::FailedPreconditionError(absl::StrCat(
        "session ", r.id(), " was stored with KV pages of ", r.geometry().page_tokens(),
        " tokens, dtype ", StoredDtypeName(r.geometry().dtype()), "; this server uses ",
        g.page_tokens, " tokens, ", KvDtypeName(g.dtype)));
  }
  return s;
}

int64_t UnstoredPageBytes(const SessionRecord& record, const Session& s, const KvGeometry& g) {
  const int pages = record.page_hashes_size();
  int stored = 0;
  while (stored < pages && stored < static_cast<int>(s.persisted_page_hashes.size()) &&
         HashFromBytes(record.page_hashes(stored)) == s.persisted_page_hashes[stored]) {
    ++stored;
  }
  return static_cast<int64_t>(pages - stored) *
         static_cast<int64_t>(EncodedPageBytes(g, g.page_tokens));
}

void MarkPersisted(const SessionRecord& record, Session* s) {
  s->version = record.version();
  s->persisted_kv_length = record.kv_length();
  s->persisted_record_bytes = static_cast<int64_t>(record.ByteSizeLong());
  s->persisted_page_hashes.clear();
  for (const std::string& h : record.page_hashes()) s->persisted_page_hashes.push_back(HashFromBytes(h));
  s->dirty = false;
  s->unsaved_record_bytes = 0;
  s->unsaved_page_bytes = 0;
}

}  // namespace kvs
