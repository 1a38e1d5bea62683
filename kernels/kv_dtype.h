// KvDtype: the element types a KV cache can be stored in, and the bytes a
// row of head_dim values takes in each.
//
//   f32   4 bytes a value.
//   f16   IEEE binary16, round to nearest even (2 bytes).
//   bf16  bfloat16, round to nearest even (2 bytes): f32's range, 8 bits
//         of precision.
//   q8_0  ggml's Q8_0 block: 32 values = an F16 scale d and 32 int8 quants
//         q, value = d * q (34 bytes per 32 values). A row of head_dim
//         values is head_dim / 32 blocks, so q8_0 needs head_dim % 32 == 0
//         (KvDtypeFitsHeadDim); llama.cpp has the same rule. Its scores
//         round the query on the stack, so head_dim is also at most
//         kKvQ8_0MaxHeadDim (no model comes near: 64 to 256 are usual).
//
// Every stored value converts to F32 exactly (an int8 times an F16 scale
// has at most 19 significant bits), so a kernel may convert where it likes
// and get the same F32 values. The numeric values of the enum are stored
// on disk (page headers, session records): never renumber them.
#ifndef KVSESSION_KERNELS_KV_DTYPE_H_
#define KVSESSION_KERNELS_KV_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvs {

enum class KvDtype : uint8_t { kF32 = 0, kF16 = 1, kQ8_0 = 2, kBF16 = 3 };

// Values per q8_0 block and its bytes (F16 scale + 32 int8).
inline constexpr int kKvQ8_0BlockValues = 32;
inline constexpr int kKvQ8_0MaxHeadDim = 1024;
inline constexpr size_t kKvQ8_0BlockBytes = 34;

// True for the numeric values of KvDtype (a record or page header field).
constexpr bool KvDtypeKnown(uint32_t value) { return value <= 3; }

// "f32", "f16", "q8_0", "bf16" (the --kv-type names); "?" for others.
const char* KvDtypeName(KvDtype t);
// The dtype named `name` (as KvDtypeName), or nullopt.
std::optional<KvDtype> KvDtypeFromName(std::string_view name);

// Whether rows of head_dim values can be stored as t.
constexpr bool KvDtypeFitsHeadDim(KvDtype t, int head_dim) {
  return head_dim > 0 &&
         (t != KvDtype::kQ8_0 || (head_dim % kKvQ8_0BlockValues == 0 && head_dim <= kKvQ8_0MaxHeadDim));
}

// Bytes of n values stored as t (for q8_0, n must be a multiple of 32).
constexpr size_t KvBytes(KvDtype t, int64_t n) {
  switch (t) {
    case KvDtype::kF32:
      return static_cast<size_t>(n) * 4;
    case KvDtype::kQ8_0:
      return static_cast<size_t>(n / kKvQ8_0BlockValues) * kKvQ8_0BlockBytes;
    default:
      return static_cast<size_t>(n) * 2;
  }
}

}  // namespace kvs

#endif  // KVSESSION_KERNELS_KV_DTYPE_H_
