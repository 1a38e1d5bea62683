#include "tools/load/session_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvs::load {
namespace {

constexpr auto kCancelEcho = std::chrono::seconds(1);
constexpr size_t kMaxProblems = 20;

void AddProblem(VerifyResult& result, std::string what) {
  if (result.problems.size() < kMaxProblems) result.problems.push_back(std::move(what));
}

template <typename Index>
void SwapRemove(std::vector<std::string>& list, Index& index, const std::string& id) {
  auto it = index.find(id);
  if (it == index.end()) return;
  const size_t i = it->second;
  index.erase(it);
  if (i + 1 != list.size()) {
    list[i] = std::move(list.back());
    index[list[i]] = i;
  }
  list.pop_back();
}

}  // namespace

void SessionLedger::AddLive(const std::string& id) {
  if (live_index_.count(id)) return;
  live_index_[id] = live_.size();
  live_.push_back(id);
}

void SessionLedger::RemoveLive(const std::string& id) { SwapRemove(live_, live_index_, id); }

void SessionLedger::AddLiveCheckpoint(const std::string& id) {
  if (live_checkpoint_index_.count(id)) return;
  live_checkpoint_index_[id] = live_checkpoints_.size();
  live_checkpoints_.push_back(id);
}

void SessionLedger::RemoveLiveCheckpoint(const std::string& id) {
  SwapRemove(live_checkpoints_, live_checkpoint_index_, id);
}

std::optional<std::string> SessionLedger::PickSession(std::mt19937_64& rng) {
  absl::MutexLock lock(&mu_);
  if (live_.empty()) return std::nullopt;
  return live_[std::uniform_int_distribution<size_t>(0, live_.size() - 1)(rng)];
}

std::optional<std::string> SessionLedger::PickCheckpoint(std::mt19937_64& rng) {
  absl::MutexLock lock(&mu_);
  if (live_checkpoints_.empty()) return std::nullopt;
  return live_checkpoints_[std::uniform_int_distribution<size_t>(0, live_checkpoints_.size() - 1)(rng)];
}

size_t SessionLedger::live_sessions() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

size_t SessionLedger::live_checkpoints() const {
  absl::MutexLock lock(&mu_);
  return live_checkpoints_.size();
}

int32_t SessionLedger::AcknowledgedLength(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? 0 : static_cast<int32_t>(it->second.tokens.size());
}

std::vector<int32_t> SessionLedger::KnownPrefix(const std::string& id, int32_t length) const {
  std::vector<int32_t> out(std::max(length, 0), kUnknownToken);
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return out;
  const std::vector<int32_t>& t = it->second.tokens;
  std::copy_n(t.begin(), std::min(out.size(), t.size()), out.begin());
  return out;
}

std::vector<int32_t> SessionLedger::CheckpointTokens(const std::string& checkpoint_id) const {
  absl::MutexLock lock(&mu_);
  auto it = checkpoints_.find(checkpoint_id);
  return it == checkpoints_.end() ? std::vector<int32_t>{} : it->second.tokens;
}

SessionLedger::CallTicket SessionLedger::BeginCall(const std::string& id) {
  absl::MutexLock lock(&mu_);
  TrackedSession& s = sessions_[id];  // picked sessions are tracked already
  CallTicket ticket{id, ++s.call_seq, s.in_flight > 0};
  ++s.in_flight;
  return ticket;
}

SessionLedger::CallEnd SessionLedger::EndCall(const CallTicket& ticket) {
  absl::MutexLock lock(&mu_);
  CallEnd end;
  auto it = sessions_.find(ticket.session_id);
  if (it == sessions_.end()) return end;
  TrackedSession& s = it->second;
  --s.in_flight;
  end.overlapped = ticket.overlapped_at_start || s.call_seq != ticket.seq;
  end.recent_cancel = s.last_cancel != std::chrono::steady_clock::time_point{} &&
                      std::chrono::steady_clock::now() - s.last_cancel < kCancelEcho;
  end.deleted = s.life != Life::kLive;
  return end;
}

void SessionLedger::AckNewSession(const std::string& id, std::vector<int32_t> tokens) {
  absl::MutexLock lock(&mu_);
  TrackedSession& s = sessions_[id];
  s.unchecked.push_back({0, static_cast<int32_t>(tokens.size())});
  s.tokens = std::move(tokens);
  AddLive(id);
}

absl::Status SessionLedger::AckAppend(const std::string& id, int32_t length_after,
                                      std::span<const int32_t> added) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return absl::InternalError(absl::StrCat("acknowledged a call on untracked session ", id));
  }
  TrackedSession& s = it->second;
  const int32_t begin = length_after - static_cast<int32_t>(added.size());
  auto contradiction = [&](std::string what) {
    s.uncertain = true;
    return absl::InternalError(absl::StrCat("session ", id, ": ", what));
  };
  if (begin < 0) return contradiction(absl::StrCat("length ", length_after, " < tokens added"));
  // An acknowledgement may reach us after the Delete that followed it on the
  // server was acknowledged to another client: not a contradiction.
  for (size_t i = 0; i < added.size(); ++i) {
    const size_t pos = begin + i;
    if (pos < s.tokens.size() && s.tokens[pos] != kUnknownToken && s.tokens[pos] != added[i]) {
      return contradiction(absl::StrCat("token at ", pos, " was ", s.tokens[pos], ", now ", added[i]));
    }
  }
  if (static_cast<int32_t>(s.tokens.size()) < length_after) {
    s.tokens.resize(length_after, kUnknownToken);
  }
  std::copy(added.begin(), added.end(), s.tokens.begin() + begin);
  s.unchecked.push_back({begin, length_after});
  return absl::OkStatus();
}

void SessionLedger::MarkUncertain(const std::string& id, bool cancelled) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  it->second.uncertain = true;
  if (cancelled) it->second.last_cancel = std::chrono::steady_clock::now();
}

bool SessionLedger::BeginDelete(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.life != Life::kLive) return false;
  it->second.life = Life::kDeleting;
  RemoveLive(id);
  return true;
}

void SessionLedger::AckDelete(const std::string& id) {
  absl::MutexLock lock(&mu_);
  sessions_[id].life = Life::kDeleted;
}

void SessionLedger::DeleteRejected(const std::string& id) {
  absl::MutexLock lock(&mu_);
  sessions_[id].life = Life::kLive;
  AddLive(id);
}

void SessionLedger::DeleteUnknown(const std::string& id) {
  absl::MutexLock lock(&mu_);
  sessions_[id].life = Life::kDeleteUnknown;
}

bool SessionLedger::EnterSession(const std::string& id) {
  absl::MutexLock lock(&mu_);
  TrackedSession& s = sessions_[id];  // picked sessions are tracked already
  if (s.truncating) return false;
  ++s.sections;
  return true;
}

void SessionLedger::LeaveSession(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it != sessions_.end() && it->second.sections > 0) --it->second.sections;
}

bool SessionLedger::BeginTruncate(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return false;
  TrackedSession& s = it->second;
  if (s.life != Life::kLive || s.sections > 0 || s.truncating) return false;
  s.truncating = true;
  return true;
}

void SessionLedger::CutTo(TrackedSession& s, int32_t length) {
  // Positions from `length` on are no longer required: calls acknowledged
  // before the cut are checked up to it.
  length = std::max(length, 0);
  if (static_cast<int32_t>(s.tokens.size()) > length) s.tokens.resize(length);
  for (Range& r : s.unchecked) {
    r.begin = std::min(r.begin, length);
    r.end = std::min(r.end, length);
  }
}

void SessionLedger::AckTruncate(const std::string& id, int32_t length) {
  absl::MutexLock lock(&mu_);
  TrackedSession& s = sessions_[id];
  s.truncating = false;
  CutTo(s, length);
  s.tokens.resize(std::max(length, 0), kUnknownToken);
  // The server said the session is exactly these tokens, with no call of
  // ours on it: whatever an earlier unacknowledged call did is settled.
  s.uncertain = false;
  s.truncated = true;
  s.unchecked.push_back({length, length});
}

void SessionLedger::TruncateRejected(const std::string& id) {
  absl::MutexLock lock(&mu_);
  sessions_[id].truncating = false;
}

void SessionLedger::TruncateUnknown(const std::string& id, int32_t length) {
  absl::MutexLock lock(&mu_);
  TrackedSession& s = sessions_[id];
  s.truncating = false;
  CutTo(s, length);
  s.uncertain = true;
}

void SessionLedger::AckSnapshot(const std::string& checkpoint_id, int32_t length,
                                std::vector<int32_t> tokens) {
  absl::MutexLock lock(&mu_);
  TrackedCheckpoint& c = checkpoints_[checkpoint_id];
  c.length = length;
  c.tokens = std::move(tokens);
  AddLiveCheckpoint(checkpoint_id);
}

bool SessionLedger::BeginDeleteCheckpoint(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = checkpoints_.find(id);
  if (it == checkpoints_.end() || it->second.life != Life::kLive) return false;
  it->second.life = Life::kDeleting;
  RemoveLiveCheckpoint(id);
  return true;
}

void SessionLedger::AckDeleteCheckpoint(const std::string& id) {
  absl::MutexLock lock(&mu_);
  TrackedCheckpoint& c = checkpoints_[id];
  c.life = Life::kDeleted;
  c.unchecked = true;
}

void SessionLedger::DeleteCheckpointRejected(const std::string& id) {
  absl::MutexLock lock(&mu_);
  checkpoints_[id].life = Life::kLive;
  AddLiveCheckpoint(id);
}

void SessionLedger::DeleteCheckpointUnknown(const std::string& id) {
  absl::MutexLock lock(&mu_);
  checkpoints_[id].life = Life::kDeleteUnknown;
}

bool SessionLedger::SessionDeleted(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  return it != sessions_.end() && it->second.life != Life::kLive;
}

bool SessionLedger::Tracks(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  return sessions_.count(id) > 0 || checkpoints_.count(id) > 0;
}

bool SessionLedger::CheckpointDeleted(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = checkpoints_.find(id);
  return it != checkpoints_.end() && it->second.life != Life::kLive;
}

std::vector<std::string> SessionLedger::SessionsToCheck() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, s] : sessions_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void SessionLedger::VerifySession(const std::string& id, TrackedSession& s,
                                  const std::optional<std::vector<int32_t>>& server,
                                  VerifyResult& result) {
  const int64_t calls = static_cast<int64_t>(s.unchecked.size());
  if (s.life == Life::kDeleted) {
    result.checked += calls + 1;
    if (server.has_value()) {
      result.lost += 1;
      AddProblem(result, absl::StrCat("session ", id, ": acknowledged Delete lost (it exists)"));
    }
    return;
  }
  if (!server.has_value()) {
    result.checked += calls;
    if (s.life == Life::kDeleteUnknown) return;  // the unacknowledged Delete happened
    const int64_t lost = std::max<int64_t>(calls, 1);
    if (calls == 0) result.checked += 1;
    result.lost += lost;
    AddProblem(result, absl::StrCat("session ", id, ": NOT_FOUND after restart (", lost,
                                    " acknowledged calls lost)"));
    return;
  }
  const std::vector<int32_t>& t = *server;
  const size_t acked = s.tokens.size();
  size_t first_mismatch = std::min(acked, t.size());
  for (size_t i = 0; i < first_mismatch; ++i) {
    if (s.tokens[i] != kUnknownToken && s.tokens[i] != t[i]) {
      first_mismatch = i;
      break;
    }
  }
  // Every position below `intact` holds what was acknowledged.
  const size_t intact = first_mismatch;
  result.checked += calls;
  int64_t lost = 0;
  for (const Range& r : s.unchecked) {
    if (static_cast<size_t>(r.end) > intact) ++lost;
  }
  if (lost == 0 && intact < acked) {
    lost = 1;  // a state verified earlier changed
    result.checked += 1;
  }
  if (lost > 0) {
    result.lost += lost;
    AddProblem(result, absl::StrCat("session ", id, ": ", lost, " acknowledged calls lost (",
                                    acked, " tokens acknowledged, ", t.size(),
                                    " after restart, first difference at ", intact, ")"));
  }
  if (t.size() > acked && !s.uncertain && s.life == Life::kLive) {
    if (s.truncated) {
      // Longer than an acknowledged Truncate left it, and nothing since may
      // have added tokens: the Truncate was lost.
      if (lost == 0) {  // else already counted
        ++result.lost;
        AddProblem(result, absl::StrCat("session ", id, ": acknowledged Truncate lost (", t.size(),
                                        " tokens after restart, ", acked, " acknowledged)"));
      }
    } else {
      ++result.phantom;
      AddProblem(result, absl::StrCat("session ", id, ": ", t.size(), " tokens after restart, ",
                                      acked, " acknowledged and no call was in flight"));
    }
  }
}

VerifyResult SessionLedger::Verify(const ServerView& server) {
  absl::MutexLock lock(&mu_);
  VerifyResult result;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const std::string& id = it->first;
    TrackedSession& s = it->second;
    auto seen = server.sessions.find(id);
    if (seen == server.sessions.end()) {  // the caller could not read it back
      AddProblem(result, absl::StrCat("session ", id, " was not read back"));
      ++result.lost;
      RemoveLive(id);
      it = sessions_.erase(it);
      continue;
    }
    VerifySession(id, s, seen->second, result);
    if (s.life != Life::kLive || !seen->second.has_value()) {
      RemoveLive(id);
      it = sessions_.erase(it);
      continue;
    }
    s.tokens = *seen->second;  // the new baseline
    s.uncertain = false;
    s.unchecked.clear();
    s.in_flight = 0;
    s.sections = 0;
    s.truncating = false;
    s.truncated = false;
    ++it;
  }
  for (auto it = checkpoints_.begin(); it != checkpoints_.end();) {
    const std::string& id = it->first;
    TrackedCheckpoint& c = it->second;
    auto listed = server.checkpoints.find(id);
    bool drop = false;
    if (c.life == Life::kLive) {
      if (c.unchecked) ++result.checked;
      if (listed == server.checkpoints.end() || listed->second != c.length) {
        ++result.lost;
        if (!c.unchecked) ++result.checked;
        AddProblem(result, listed == server.checkpoints.end()
                               ? absl::StrCat("checkpoint ", id, " is missing after restart")
                               : absl::StrCat("checkpoint ", id, " has length ", listed->second,
                                              ", acknowledged ", c.length));
        drop = true;
      }
      c.unchecked = false;
    } else if (c.life == Life::kDeleted) {
      ++result.checked;
      if (listed != server.checkpoints.end()) {
        ++result.lost;
        AddProblem(result, absl::StrCat("checkpoint ", id, ": acknowledged delete lost"));
      }
      drop = true;
    } else {
      drop = true;  // an unacknowledged delete: either outcome is allowed
    }
    if (drop) {
      RemoveLiveCheckpoint(id);
      it = checkpoints_.erase(it);
    } else {
      ++it;
    }
  }
  return result;
}

}  // namespace kvs::load
