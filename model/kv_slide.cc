#include "model/kv_slide.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/kv_dtype.h"
#include "kernels/q8_0_kv_blocks.h"

namespace kvs {

absl::StatusOr<SlidePlan> PlanSlide(int kv_length, int max_context, int keep_tokens,
                                    int page_tokens) {
  const int t = page_tokens;
  SlidePlan plan;
  plan.keep_pages = (std::max(0, keep_tokens) + t - 1) / t;
  const int after_keep = max_context / t - plan.keep_pages;  // whole pages after the kept ones
  if (after_keep < 1) {
    return absl::OutOfRangeError(absl::StrCat(
        "keep_tokens ", keep_tokens, " (", plan.keep_pages, " pages of ", t,
        " tokens) leaves no page of the ", max_context, "-token context to drop"));
  }
  plan.drop_pages = std::max(1, after_keep / 2);
  if ((plan.keep_pages + plan.drop_pages) * t > kv_length) {
    return absl::OutOfRangeError(absl::StrCat("the KV holds ", kv_length,
                                              " positions; sliding needs ",
                                              (plan.keep_pages + plan.drop_pages) * t));
  }
  return plan;
}

absl::Status SlideKv(const KeyRotation& rotation, const SlidePlan& plan, bool from_reserve,
                     KvSequence* kv) {
  const KvGeometry& g = kv->geometry();
  const int t = g.page_tokens;
  const int length = kv->length();
  if (plan.keep_pages < 0 || plan.drop_pages < 1 ||
      (plan.keep_pages + plan.drop_pages) * t > length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slide of ", plan.drop_pages, " pages after ", plan.keep_pages, " is outside the ", length,
        "-position sequence"));
  }
  PagePool* pool = kv->pool();
  const int used = (length + t - 1) / t;
  const int first_moved = plan.keep_pages + plan.drop_pages;
  const int new_length = length - plan.drop_pages * t;
  const int64_t delta = -static_cast<int64_t>(plan.drop_pages) * t;

  // The new table: the kept pages (one more reference each: Adopt releases
  // the old table's), then a turned page for each moved one.
  std::vector<PageId> table(kv->page_table().begin(), kv->page_table().begin() + plan.keep_pages);
  std::vector<PageId> copies;  // new pages, released on failure
  for (int i = first_moved; i < used; ++i) {
    const PageId old = kv->page_table()[i];
    if (pool->TakeSole(old)) {
      // Ours alone: turn in place (its prefix-cache key, if any, is gone:
      // the bytes it named are about to change; losing it is harmless if
      // a later step fails).
      table.push_back(old);
      continue;
    }
    absl::StatusOr<PageId> copy = pool->Allocate(from_reserve, kv->owner());
    if (!copy.ok()) {
      for (PageId p : copies) pool->Release(p, kv->owner());
      return copy.status();
    }
    std::memcpy(pool->data(*copy), pool->data(old), g.page_bytes());
    copies.push_back(*copy);
    table.push_back(*copy);
  }
  // Nothing can fail from here on.
  for (int i = 0; i < plan.keep_pages; ++i) pool->AddRef(table[i], kv->owner());
  for (int i = first_moved; i < used; ++i) {
    const PageId page = table[plan.keep_pages + (i - first_moved)];
    if (page == kv->page_table()[i]) pool->AddRef(page, kv->owner());  // turned in place: keep it
    rotation.Rotate(g, pool->data(page), std::min(t, length - i * t), delta);
  }
  kv->Adopt(std::move(table), new_length);
  return absl::OkStatus();
}

absl::Status SlideKvTokens(const KeyRotation& rotation, const TokenSlide& slide,
                           bool from_reserve, KvSequence* kv) {
  const KvGeometry& g = kv->geometry();
  const int t = g.page_tokens;
  const int length = kv->length();
  const int keep = slide.keep_tokens, drop = slide.drop_tokens;
  if (keep < 0 || drop < 1 || keep > length - drop) {
    return absl::InvalidArgumentError(absl::StrCat("slide of ", drop, " tokens after ", keep,
                                                   " is outside the ", length,
                                                   "-position sequence"));
  }
  if (keep % t == 0 && drop % t == 0) {
    return SlideKv(rotation, SlidePlan{keep / t, drop / t}, from_reserve, kv);
  }
  PagePool* pool = kv->pool();
  const int new_length = length - drop;
  const int kept_pages = keep / t;                       // untouched
  const int new_pages = (new_length + t - 1) / t - kept_pages;  // rebuilt
  std::vector<PageId> table(kv->page_table().begin(), kv->page_table().begin() + kept_pages);
  std::vector<PageId> fresh;  // new pages, released on failure
  for (int i = kept_pages; i < kept_pages + new_pages; ++i) {
    const PageId old = kv->page_table()[i];
    if (pool->TakeSole(old)) {
      // Ours alone: rebuilt in place (out of the prefix cache, as in
      // SlideKv). Rows only move towards the start, and are copied in
      // increasing position order, so no row is overwritten before it is
      // read.
      table.push_back(old);
      continue;
    }
    absl::StatusOr<PageId> page = pool->Allocate(from_reserve, kv->owner());
    if (!page.ok()) {
      for (PageId p : fresh) pool->Release(p, kv->owner());
      return page.status();
    }
    fresh.push_back(*page);
    table.push_back(*page);
  }
  // Nothing can fail from here on. Copy runs of rows that stay inside one
  // source and one destination page: the kept slots of the partial page
  // (source = destination position), then the moved tokens.
  const size_t row = g.slot_offset(1);
  std::vector<uint8_t> slot_row_buffer(row);
  uint8_t* slot_row = slot_row_buffer.data();
  auto copy = [&](int from, int to, int n) {
    while (n > 0) {
      const int run = std::min({n, t - from % t, t - to % t});
      const uint8_t* src = pool->data(kv->page_table()[from / t]);
      uint8_t* dst = pool->data(table[to / t]);
      for (int layer = 0; layer < g.n_layers; ++layer) {
        for (int part = 0; part < 2; ++part) {
          for (int head = 0; head < g.n_kv_heads; ++head) {
            const size_t block = g.block_offset(layer, static_cast<KvPart>(part), head);
            if (g.dtype == KvDtype::kQ8_0) {
              // Not rows (q8_0_kv_blocks.h): slot by slot through a row,
              // in increasing order (a slot moves only towards the start,
              // so none is overwritten before it is read).
              for (int i = 0; i < run; ++i) {
                if (part == static_cast<int>(KvPart::kKey)) {
                  LoadQ8_0KeySlot(src + block, g.head_dim, from % t + i, slot_row);
                  StoreQ8_0KeySlot(slot_row, g.head_dim, to % t + i, dst + block);
                } else {
                  LoadQ8_0ValueSlot(src + block, g.head_dim, t, from % t + i, slot_row);
                  StoreQ8_0ValueSlot(slot_row, g.head_dim, t, to % t + i, dst + block);
                }
              }
              continue;
            }
            std::memmove(dst + block + g.slot_offset(to % t), src + block + g.slot_offset(from % t),
                         run * row);
          }
        }
      }
      from += run;
      to += run;
      n -= run;
    }
  };
  copy(kept_pages * t, kept_pages * t, keep - kept_pages * t);
  copy(keep + drop, keep, new_length - keep);
  for (int i = kept_pages; i < kept_pages + new_pages; ++i) {
    const int first = std::max(keep, i * t) - i * t;
    const int end = std::min(new_length, (i + 1) * t) - i * t;
    rotation.RotateSlots(g, pool->data(table[i]), first, end, -static_cast<int64_t>(drop));
  }
  for (int i = 0; i < kept_pages + new_pages; ++i) {
    if (table[i] == kv->page_table()[i]) pool->AddRef(table[i], kv->owner());  // kept, or rebuilt in place
  }
  kv->Adopt(std::move(table), new_length);
  return absl::OkStatus();
}

}  // namespace kvs
