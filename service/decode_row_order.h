// GroupRowsByKey: orders a step's decode rows so that rows with the same
// key are consecutive. The engine keys each decode row by its session's
// first KV page, so the forks of one prompt decode side by side and the
// attention kernel folds their shared pages once for all of them
// (kernels/attention.h, AttentionUpdateRuns shares only between
// consecutive runs). Results never depend on the order of a batch's rows
// (the engine's determinism contract), so this only changes speed.
//
// Order: groups appear in the order of their first row, and the rows of a
// group keep their order; an already grouped list is left as it is. O(n^2)
// key calls for n rows, in place, no allocation (a step allocates
// nothing; the engine plans at most 128 decode rows).
//
// Thread safety: none needed; it works on the caller's span.
#ifndef KVSESSION_SERVICE_DECODE_ROW_ORDER_H_
#define KVSESSION_SERVICE_DECODE_ROW_ORDER_H_

#include <algorithm>
#include <cstddef>
#include <span>

namespace kvs {

// `key(row)` returns a value comparable with ==; it is called on rows as
// they move, so it must depend only on the row.
template <typename Row, typename KeyFn>
void GroupRowsByKey(std::span<Row> rows, KeyFn key) {
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto group = key(rows[i - 1]);
    if (key(rows[i]) == group) continue;
    // The next row of the group that row i - 1 ends, if any, moves up to i;
    // rows [i, j) shift down one, keeping their order.
    for (size_t j = i + 1; j < rows.size(); ++j) {
      if (key(rows[j]) == group) {
        std::rotate(rows.begin() + i, rows.begin() + j, rows.begin() + j + 1);
        break;
      }
    }
  }
}

}  // namespace kvs

#endif  // KVSESSION_SERVICE_DECODE_ROW_ORDER_H_
