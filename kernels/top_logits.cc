#include "kernels/top_logits.h"


#include "kernels/kernel_table.h"
#include "kernels/top_logit_heap.h"

namespace kvs {

int64_t ArgmaxScalar(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == x[i] && (best < 0 || x[i] > x[best])) best = i;
  }
  return best < 0 ? 0 : best;
}

int TopKScalar(const float* x, int64_t n, int k, TopLogit* out) {
  TopLogitHeap heap(k, out);
  if (k <= 0) return 0;
  for (int64_t i = 0; i < n; ++i) heap.Offer(x[i], i);
  return heap.Finish();
}

int LogitsAboveScalar(const float* x, int64_t n, float floor, int max_out, TopLogit* out) {
  int count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!(x[i] > floor)) continue;
    if (count == max_out) return max_out + 1;
    out[count++] = {x[i], static_cast<int32_t>(i)};
  }
  return count;
}

int64_t Argmax(const float* x, int64_t n) { return kernel_table::ActiveKernelTable().argmax(x, n); }

int TopK(const float* x, int64_t n, int k, TopLogit* out) {
  return kernel_table::ActiveKernelTable().top_k(x, n, k, out);
}

int LogitsAbove(const float* x, int64_t n, float floor, int max_out, TopLogit* out) {
  return kernel_table::ActiveKernelTable().logits_above(x, n, floor, max_out, out);
}

namespace kernel_table {

void FillScalarTopLogits(KernelTable* t) {
  t->argmax = ArgmaxScalar;
  t->top_k = TopKScalar;
  t->logits_above = LogitsAboveScalar;
}

}  // namespace kernel_table
}  // namespace kvs
