// Packed Q8_0: Q8_0 weights re-laid out at load time for the fast path, so
// that one arithmetic serves every batch size and instruction set.
//
// Layout: rows in groups of 16 (the last group padded with zero rows);
// a group holds, for its nb = cols / 32 blocks,
//   scales  F16 [nb][16]                 (padded to 64 bytes)
//   quants  uint8 [nb][8][16][4]         (q + 128, the "VNNI" layout:
//                                          quants[b][kk][n][t] = q[n][32 b + 4 kk + t])
// which is the tile layout AMX multiplies directly and lets AVX-512 VNNI
// compute 16 rows' block dots in the 16 lanes of a register, with no
// horizontal sums.
//
// Arithmetic (every kernel, bit for bit): for weight row n and activation
// row j (Q8_0 activation blocks, kernels/matmul.h),
//   isum_b = sum_k q_w[n][k] * q_x[j][k] over block b        (exact int32)
//   y = 0;  for b = 0 .. nb-1:  y = fma(float(isum_b), d_w[n][b] * d_x[j][b], y)
// So a row's value never depends on the batch, the thread split, the
// instruction set or whether AMX ran: prefill, decode and forks agree to
// the last bit.
//
// Dispatch: MatmulPackedQ8_0 runs the kernel of the active kernel table
// (kernel_table.h): the scalar reference at the scalar level (which does
// not pack), AVX2 at the AVX2 level (packed_q8_0_avx2.cc: the same integers
// from VPMADDUBSW/VPMADDWD), AVX-512 VNNI at the AVX-512 level, and AMX
// there for batches of kAmxMinRows rows or more when AmxAvailable() held
// when the tables were built (then ActiveKernelsName() is "avx512+amx").
//
// Thread safety: every function is pure except AmxAvailable(), which asks
// Linux for AMX tile data once (thread-safe static initialisation); the
// kernels may run concurrently on disjoint outputs.
#ifndef KVSESSION_KERNELS_PACKED_Q8_0_H_
#define KVSESSION_KERNELS_PACKED_Q8_0_H_

#include <cstddef>
#include <cstdint>

namespace kvs {

// Bytes of one packed group of 16 rows of `cols` values, and of a matrix.
size_t PackedQ8_0GroupBytes(int64_t cols);
size_t PackedQ8_0Bytes(int64_t rows, int64_t cols);

// Packs `rows` Q8_0 rows (GGUF layout, `row_bytes` apart) into `out`
// (PackedQ8_0Bytes; 64-byte aligned for the kernels' speed, any address
// works), a group at a time by PackQ8_0Group
// (the active level's packer: the same bytes on every level; with the
// scalar one, a 0.6B model's load spent about a second packing).
void PackQ8_0(const uint8_t* rows_data, size_t row_bytes, int64_t rows, int64_t cols, uint8_t* out);

// Packs up to 16 Q8_0 rows, row n at rows[n] (n < n_rows), into one group
// (PackedQ8_0GroupBytes(cols) bytes at `out`: any address, 64-byte
// aligned for speed); rows [n_rows, 16) are zero. The same bytes as PackQ8_0 gives that group, by
// the active kernel table's packer (SIMD at the AVX2 and AVX-512 levels):
// fast enough to pack a KV cache's Q8_0 keys on every attention call
// (kernels/attention_q8_0_scores.h). While it packs, it asks for the lines
// of [ahead, ahead + ahead_bytes) into L2 (the rows a later call packs;
// none when ahead_bytes is 0), a share per block, so a stream of calls
// reads memory steadily rather than in bursts.
void PackQ8_0Group(const uint8_t* const* rows, int n_rows, int64_t cols, uint8_t* out,
                   const uint8_t* ahead = nullptr, size_t ahead_bytes = 0);

// The scalar reference of PackQ8_0Group (the scalar level's table entry).
void PackQ8_0GroupScalar(const uint8_t* const* rows, int n_rows, int64_t cols, uint8_t* out,
                         const uint8_t* ahead, size_t ahead_bytes);

// True when the active kernel level packs Q8_0 weights (AVX2 and AVX-512);
// otherwise the model keeps the GGUF layout.
bool PackedQ8_0Supported();

// Activation rows from which AMX is used (where the CPU and OS allow it).
constexpr int kAmxMinRows = 16;
// True when the CPU has AVX-512 VNNI, AMX-TILE and AMX-INT8, Linux enabled
// tile data for this process (asked once, on the first call), and the
// environment variable KVS_AMX is not "0". Decided once per process; the
// kernel tables record it when they are built.
bool AmxAvailable();

// y[j * y_stride + r] = W[r] . x[j] for r in [r0, r1), j in [0, nx), with
// the arithmetic above, by the active kernel table's packed kernel. `xq`:
// nx activation rows of int8 quants, rows `x_row_bytes` apart, F32 scales
// (one per 32) at + `scales_offset`, and right after the scales the int16
// sums of each 16 quants (as QuantizeActivations writes Q8_0 rows and
// QuantizeQueryQ8_0 queries): the AVX-512 kernel starts each block's
// products from -128 times its sum (the weights' + 128) instead of summing
// the quants on every call.
// `ask_end` > r1 says the calling thread goes on with rows [r1, ask_end) of
// the same matrix next: a kernel that reads its weights ahead may then ask
// for their lines before its own range ends (the AVX-512 kernel does for
// a call of 5 to 16 rows), so a thread's run of calls
// streams its weights as one call over the whole run would. It never
// changes a value; 0 (or anything <= r1) asks for nothing past r1.
// `asked` says this thread's previous call ended at r0 with an `ask_end`
// past r0, so it has asked for the lines of this range's first groups: a
// kernel that would ask for them as its range starts (the AVX-512 kernel,
// for a call of 5 to 16 rows) then asks only as its groups go, as in the
// middle of one call (asking again cost a run of 192-row calls 3% of
// its time from memory on Zen 5 and one of 64-row calls 7%:
// kvs-bench-kernels gemm_packed nx8 /tasksN/ahead). It never changes a
// value either.
void MatmulPackedQ8_0(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                      const uint8_t* xq, size_t x_row_bytes, size_t scales_offset, int nx,
                      float* y, int64_t y_stride, int64_t ask_end = 0, bool asked = false);

// The fewest weight rows worth one MatmulPackedQ8_0 call with `nx`
// activation rows, for callers that split a matrix between threads: a
// shorter call costs its kernel more time than the finer split gains. 16
// (one group) unless the active kernel says otherwise: the AVX-512 kernel
// gives a call of 5 to 16 rows (fan-out: one pass over weights from
// memory) 192, since it asks for a call's first groups only once the call
// starts (gemm_packed nx8/151936x1024/tasks64 against /tasks192 in
// kvs-bench-kernels). AMX (16 rows or more) says 16.
int64_t PackedQ8_0MinCallRows(int nx);

// The scalar reference of the same arithmetic (the scalar level's table
// entry, and the tests' reference); it asks for nothing.
void MatmulPackedQ8_0Scalar(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0,
                            int64_t r1, const uint8_t* xq, size_t x_row_bytes,
                            size_t scales_offset, int nx, float* y, int64_t y_stride,
                            int64_t ask_end = 0, bool asked = false);

namespace packed_q8_0_internal {
// Asks Linux for AMX tile data for this process (packed_q8_0_amx.cc); true
// when the CPU has AMX-TILE and AMX-INT8 and Linux granted it.
bool EnableAmx();
}  // namespace packed_q8_0_internal

}  // namespace kvs

#endif  // KVSESSION_KERNELS_PACKED_Q8_0_H_
