#include "cache/kv_sequence.h"

#include <cstring>
#include <utility>

#include "absl/base/internal/raw_logging.h"

namespace kvs {

KvSequence::KvSequence(KvSequence&& other) noexcept
    : pool_(other.pool_), pages_(std::move(other.pages_)), length_(other.length_) {
  other.pages_.clear();
  other.length_ = 0;
}

KvSequence& KvSequence::operator=(KvSequence&& other) noexcept {
  if (this != &other) {
    Clear();
    pool_ = other.pool_;
    pages_ = std::move(other.pages_);
    length_ = other.length_;
    other.pages_.clear();
    other.length_ = 0;
  }
  return *this;
}

absl::Status KvSequence::PrepareAppend(int n, bool from_reserve) {
  if (n <= 0) return absl::OkStatus();
  const int t = geometry().page_tokens;
  const int first_page = length_ / t;
  const int last_page = (length_ + n - 1) / t;
  // Copy-on-write of the page the first new position lands in, if shared
  // or keyed (a keyed page's content is immutable: the prefix cache may
  // hand it to another sequence at any time).
  if (first_page < num_pages() &&
      (pool_->ref_count(pages_[first_page]) > 1 || pool_->has_key(pages_[first_page]))) {
    absl::StatusOr<PageId> copy = pool_->Allocate(from_reserve);
    if (!copy.ok()) return copy.status();
    std::memcpy(pool_->data(*copy), pool_->data(pages_[first_page]), geometry().page_bytes());
    pool_->Release(pages_[first_page]);
    pages_[first_page] = *copy;
  }
  // Pages past the first are either fresh, or reserved by an earlier
  // PrepareAppend (and so exclusively ours).
  while (num_pages() <= last_page) {
    absl::StatusOr<PageId> page = pool_->Allocate(from_reserve);
    if (!page.ok()) return page.status();
    pages_.push_back(*page);
  }
  return absl::OkStatus();
}

void KvSequence::CommitAppend(int n) {
  ABSL_RAW_CHECK((length_ + n + geometry().page_tokens - 1) / geometry().page_tokens <= num_pages(),
                 "CommitAppend past the prepared pages");
  length_ += n;
}

KvSequence KvSequence::Fork() const {
  KvSequence child(pool_);
  const int t = geometry().page_tokens;
  const int used = (length_ + t - 1) / t;
  child.pages_.assign(pages_.begin(), pages_.begin() + used);
  for (PageId p : child.pages_) pool_->AddRef(p);
  child.length_ = length_;
  return child;
}

void KvSequence::Truncate(int new_length) {
  if (new_length >= length_) return;
  const int t = geometry().page_tokens;
  const int keep = (new_length + t - 1) / t;
  for (int i = keep; i < num_pages(); ++i) pool_->Release(pages_[i]);
  pages_.resize(keep);
  length_ = new_length;
}

void KvSequence::Clear() {
  for (PageId p : pages_) pool_->Release(p);
  pages_.clear();
  length_ = 0;
}

void KvSequence::AppendPage(PageId page) {
  const int t = geometry().page_tokens;
  ABSL_RAW_CHECK(length_ % t == 0, "AppendPage needs a page-aligned length");
  const int keep = length_ / t;
  for (int i = keep; i < num_pages(); ++i) pool_->Release(pages_[i]);  // reserved, ours alone
  pages_.resize(keep);
  pages_.push_back(page);
  length_ += t;
}

void KvSequence::Adopt(std::vector<PageId> pages, int length) {
  Clear();
  pages_ = std::move(pages);
  length_ = length;
}

}  // namespace kvs
