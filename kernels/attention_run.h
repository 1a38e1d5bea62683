// AttentionRun: a run of consecutive query rows that attend to the same KV
// blocks (the rows of one sequence in a batch), the unit of
// AttentionUpdateRuns (attention.h).
//
// The run does not own its block lists; they must outlive the call.
#ifndef KVSESSION_KERNELS_ATTENTION_RUN_H_
#define KVSESSION_KERNELS_ATTENTION_RUN_H_

namespace kvs {

struct AttentionRun {
  int rows = 0;                          // query rows, consecutive in the call
  const void* const* k_blocks = nullptr;  // the sequence's key blocks, in order
  const void* const* v_blocks = nullptr;  // its value blocks, in order
  int n_blocks = 0;
};

}  // namespace kvs

#endif  // KVSESSION_KERNELS_ATTENTION_RUN_H_
