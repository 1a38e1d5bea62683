// UnsentBytes: the encoded Generate messages that all streams hold and
// their clients have not taken yet (generate_reactor.h), against the
// server's limit (kvsessiond --max-unsent-mb). Each stream also has its own
// limit (--max-unsent-stream-kb); this one bounds their sum, so many
// streams whose clients stopped reading cannot take the server's memory.
//
// Thread-safe (one atomic). Borrowed by every GenerateReactor: it must
// outlive the server.
#ifndef KVSESSION_SERVICE_UNSENT_BYTES_H_
#define KVSESSION_SERVICE_UNSENT_BYTES_H_

#include <atomic>
#include <cstdint>

namespace kvs {

class UnsentBytes {
 public:
  explicit UnsentBytes(int64_t limit_bytes) : limit_(limit_bytes) {}
  UnsentBytes(const UnsentBytes&) = delete;
  UnsentBytes& operator=(const UnsentBytes&) = delete;

  // Counts `bytes` more (always: they are held); returns whether the total
  // is past the limit now.
  bool Add(int64_t bytes) { return total_.fetch_add(bytes, std::memory_order_relaxed) + bytes > limit_; }
  // Gives back bytes counted by Add.
  void Remove(int64_t bytes) { total_.fetch_sub(bytes, std::memory_order_relaxed); }
  int64_t total() const { return total_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> total_{0};
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_UNSENT_BYTES_H_
