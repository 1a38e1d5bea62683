#include "kernels/kv_dtype.h"

namespace kvs {

namespace {
constexpr std::string_view kNames[] = {"f32", "f16", "q8_0", "bf16"};
}  // namespace

const char* KvDtypeName(KvDtype t) {
  const auto i = static_cast<uint32_t>(t);
  return KvDtypeKnown(i) ? kNames[i].data() : "?";
}

std::optional<KvDtype> KvDtypeFromName(std::string_view name) {
  for (uint32_t i = 0; i < 4; ++i) {
    if (name == kNames[i]) return static_cast<KvDtype>(i);
  }
  return std::nullopt;
}

}  // namespace kvs
