#include "kernels/packed_q8_0.h"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/packed_q8_0_group.h"
#include "kernels/quant_blocks.h"

namespace kvs {

size_t PackedQ8_0GroupBytes(int64_t cols) {
  const int64_t nb = cols / kQK8_0;
  return ScalesBytes(nb) + static_cast<size_t>(nb) * 512;
}

size_t PackedQ8_0Bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + 15) / 16) * PackedQ8_0GroupBytes(cols);
}

void PackQ8_0GroupScalar(const uint8_t* const* rows, int n_rows, int64_t cols, uint8_t* out,
                         const uint8_t* ahead, size_t ahead_bytes) {
  for (size_t off = 0; off < ahead_bytes; off += 64) __builtin_prefetch(ahead + off, 0, 1);  // into L2
  const int64_t nb = cols / kQK8_0;
  uint16_t* scales = reinterpret_cast<uint16_t*>(out);
  uint8_t* quants = out + ScalesBytes(nb);
  std::memset(out, 0, ScalesBytes(nb));
  for (int64_t b = 0; b < nb; ++b) {
    for (int n = 0; n < 16; ++n) {
      // Rows may lie at any address (a KV page's), so bytes, not BlockQ8_0 members.
      const uint8_t* blk = n < n_rows ? rows[n] + b * sizeof(BlockQ8_0) : nullptr;
      if (blk != nullptr) std::memcpy(scales + b * 16 + n, blk + offsetof(BlockQ8_0, d), sizeof(uint16_t));
      for (int k = 0; k < kQK8_0; ++k) {
        const int q = blk ? static_cast<int8_t>(blk[offsetof(BlockQ8_0, qs) + k]) : 0;
        quants[b * 512 + (k / 4) * 64 + n * 4 + k % 4] = static_cast<uint8_t>(q + 128);
      }
    }
  }
}

void PackQ8_0Group(const uint8_t* const* rows, int n_rows, int64_t cols, uint8_t* out, const uint8_t* ahead,
                   size_t ahead_bytes) {
  kernel_table::ActiveKernelTable().pack_q8_0_group(rows, n_rows, cols, out, ahead, ahead_bytes);
}

void PackQ8_0(const uint8_t* rows_data, size_t row_bytes, int64_t rows, int64_t cols, uint8_t* out) {
  const size_t group_bytes = PackedQ8_0GroupBytes(cols);
  for (int64_t g = 0; g < (rows + 15) / 16; ++g) {
    const uint8_t* group_rows[16];
    const int n_rows = rows - 16 * g < 16 ? static_cast<int>(rows - 16 * g) : 16;
    for (int n = 0; n < n_rows; ++n) group_rows[n] = rows_data + (16 * g + n) * row_bytes;
    PackQ8_0Group(group_rows, n_rows, cols, out + g * group_bytes);
  }
}

bool PackedQ8_0Supported() { return kernel_table::ActiveKernelTable().pack_q8_0; }

bool AmxAvailable() {
  static const bool available = [] {
    const char* env = std::getenv("KVS_AMX");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    return KernelIsaSupported(KernelIsa::kAvx512) && packed_q8_0_internal::EnableAmx();
  }();
  return available;
}

void MatmulPackedQ8_0Scalar(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0,
                            int64_t r1, const uint8_t* xq, size_t x_row_bytes,
                            size_t scales_offset, int nx, float* y, int64_t y_stride,
                            int64_t /*ask_end*/, bool /*asked*/) {
  const int64_t nb = cols / kQK8_0;
  const size_t group_bytes = PackedQ8_0GroupBytes(cols);
  for (int64_t r = r0; r < r1 && r < rows; ++r) {
    const uint8_t* group = packed + (r / 16) * group_bytes;
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);
    const uint8_t* quants = group + ScalesBytes(nb);
    const int n = static_cast<int>(r % 16);
    for (int j = 0; j < nx; ++j) {
      const int8_t* xqj = reinterpret_cast<const int8_t*>(xq + j * x_row_bytes);
      const float* dx = reinterpret_cast<const float*>(xq + j * x_row_bytes + scales_offset);
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum = 0;
        for (int k = 0; k < kQK8_0; ++k) {
          const int w = quants[b * 512 + (k / 4) * 64 + n * 4 + k % 4] - 128;
          isum += w * xqj[b * kQK8_0 + k];
        }
        acc = std::fma(static_cast<float>(isum), Fp16ToFp32(scales[b * 16 + n]) * dx[b], acc);
      }
      y[j * y_stride + r] = acc;
    }
  }
}

void MatmulPackedQ8_0(const uint8_t* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                      const uint8_t* xq, size_t x_row_bytes, size_t scales_offset, int nx,
                      float* y, int64_t y_stride, int64_t ask_end, bool asked) {
  if (r0 >= r1 || nx <= 0) return;
  const kernel_table::KernelTable& t = kernel_table::ActiveKernelTable();
  const kernel_table::PackedQ8_0MatmulFn kernel =
      nx >= kAmxMinRows ? t.packed_q8_0_wide : t.packed_q8_0;
  kernel(packed, rows, cols, r0, r1, xq, x_row_bytes, scales_offset, nx, y, y_stride, ask_end, asked);
}

int64_t PackedQ8_0MinCallRows(int nx) {
  const kernel_table::KernelTable& t = kernel_table::ActiveKernelTable();
  if (nx >= kAmxMinRows && t.amx) return 16;
  return t.packed_q8_0_min_call_rows(nx);
}

namespace kernel_table {
namespace {
int64_t OneGroup(int /*nx*/) { return 16; }
}  // namespace

void FillScalarPackedQ8_0(KernelTable* t) {
  t->pack_q8_0 = false;
  t->pack_q8_0_group = PackQ8_0GroupScalar;
  t->packed_q8_0 = MatmulPackedQ8_0Scalar;
  t->packed_q8_0_wide = MatmulPackedQ8_0Scalar;
  t->packed_q8_0_min_call_rows = OneGroup;  // AVX2 keeps it: it asks a fixed distance on
  t->amx = false;
}

}  // namespace kernel_table
}  // namespace kvs
