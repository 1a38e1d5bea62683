#include "cache/ref_count_change.h"

#include <utility>

#include "absl/base/internal/raw_logging.h"

namespace kvs {

bool RefCountChange::Held(const PageHash& h) const {
  return table_->pages.contains(h) || written_.contains(h);
}

void RefCountChange::AddPage(const PageHash& h, int64_t bytes) {
  written_.insert(h);
  delta_[h].bytes = bytes;
}

void RefCountChange::SetRecord(RecordIndex* index, const std::string& id,
                               std::optional<RecordRefs> refs) {
  if (auto it = index->find(id); it != index->end()) {
    for (const PageHash& h : it->second.pages()) --delta_[h].refs;
  }
  if (refs.has_value()) {
    for (const PageHash& h : refs->pages()) ++delta_[h].refs;
  }
  records_.push_back({index, id, std::move(refs)});
}

std::vector<PageHash> RefCountChange::PagesToDelete() const {
  std::vector<PageHash> out;
  for (const auto& [hash, delta] : delta_) {
    auto it = table_->pages.find(hash);
    const int64_t before = it == table_->pages.end() ? 0 : it->second.refs;
    ABSL_RAW_CHECK(before + delta.refs >= 0, "page reference count below zero");
    if (before > 0 && before + delta.refs == 0) out.push_back(hash);
  }
  return out;
}

void RefCountChange::Apply(PageRefTable* table) {
  ABSL_RAW_CHECK(table == table_, "a change applies to the table it was made for");
  for (const auto& [hash, delta] : delta_) {
    table->page_references += delta.refs;
    auto it = table->pages.find(hash);
    if (it == table->pages.end()) {
      if (delta.refs > 0) {
        table->pages.emplace(hash, PageRef{delta.refs, delta.bytes});
        table->page_bytes += delta.bytes;
      }
    } else if (it->second.refs + delta.refs == 0) {
      table->page_bytes -= it->second.bytes;
      table->pages.erase(it);
    } else {
      it->second.refs += delta.refs;
    }
  }
  for (auto& [index, id, refs] : records_) {
    if (refs.has_value()) {
      (*index)[id] = *std::move(refs);
    } else {
      index->erase(id);
    }
  }
}

}  // namespace kvs
