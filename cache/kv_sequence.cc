#include "cache/kv_sequence.h"

#include <cstring>
#include <utility>

#include "absl/base/internal/raw_logging.h"

namespace kvs {

KvSequence::KvSequence(KvSequence&& other) noexcept
    : pool_(other.pool_),
      owner_(other.owner_),
      pages_(std::move(other.pages_)),
      length_(other.length_),
      page_count_(std::move(other.page_count_)) {
  other.pages_.clear();
  other.length_ = 0;
}

KvSequence& KvSequence::operator=(KvSequence&& other) noexcept {
  if (this != &other) {
    Clear();
    pool_ = other.pool_;
    owner_ = other.owner_;
    pages_ = std::move(other.pages_);
    length_ = other.length_;
    page_count_ = std::move(other.page_count_);
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
    absl::StatusOr<PageId> copy = pool_->Allocate(from_reserve, owner_);
    if (!copy.ok()) return copy.status();
    std::memcpy(pool_->data(*copy), pool_->data(pages_[first_page]), geometry().page_bytes());
    pool_->Release(pages_[first_page], owner_);
    pages_[first_page] = *copy;
  }
  // Pages past the first are either fresh, or reserved by an earlier
  // PrepareAppend (and so exclusively ours).
  while (num_pages() <= last_page) {
    absl::StatusOr<PageId> page = pool_->Allocate(from_reserve, owner_);
    if (!page.ok()) return page.status();
    pages_.push_back(*page);
    PublishPageCount(pages_.size());  // after the page is taken
  }
  return absl::OkStatus();
}

void KvSequence::CommitAppend(int n) {
  ABSL_RAW_CHECK((length_ + n + geometry().page_tokens - 1) / geometry().page_tokens <= num_pages(),
                 "CommitAppend past the prepared pages");
  length_ += n;
}

KvSequence KvSequence::Fork() const {
  KvSequence child(pool_, owner_);
  const int t = geometry().page_tokens;
  const int used = (length_ + t - 1) / t;
  child.pages_.assign(pages_.begin(), pages_.begin() + used);
  for (PageId p : child.pages_) pool_->AddRef(p, owner_);
  child.length_ = length_;
  child.PublishPageCount(child.pages_.size());
  return child;
}

void KvSequence::Truncate(int new_length) {
  if (new_length >= length_) return;
  const int t = geometry().page_tokens;
  const int keep = (new_length + t - 1) / t;
  if (keep < num_pages()) PublishPageCount(keep);  // before the pages are released
  for (int i = keep; i < num_pages(); ++i) pool_->Release(pages_[i], owner_);
  pages_.resize(keep);
  length_ = new_length;
}

void KvSequence::Clear() {
  PublishPageCount(0);  // before the pages are released
  for (PageId p : pages_) pool_->Release(p, owner_);
  pages_.clear();
  length_ = 0;
}

void KvSequence::AppendPage(PageId page) {
  const int t = geometry().page_tokens;
  ABSL_RAW_CHECK(length_ % t == 0, "AppendPage needs a page-aligned length");
  const int keep = length_ / t;
  if (keep + 1 < num_pages()) PublishPageCount(keep + 1);  // before reserved pages are released
  for (int i = keep; i < num_pages(); ++i) pool_->Release(pages_[i], owner_);  // reserved, ours alone
  pages_.resize(keep);
  pages_.push_back(page);
  PublishPageCount(pages_.size());
  length_ += t;
}

void KvSequence::Adopt(std::vector<PageId> pages, int length) {
  // The new pages are taken already: the count moves to theirs before the
  // old ones are released.
  PublishPageCount(pages.size());
  for (PageId p : pages_) pool_->Release(p, owner_);
  pages_ = std::move(pages);
  length_ = length;
}

}  // namespace kvs
