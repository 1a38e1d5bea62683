// The model fingerprint: SHA-256 of the whole GGUF file (32 raw bytes).
// Sessions and KV page hashes record it, so a store is never read with a
// different model's weights, even one of the same shape.
#ifndef KVSESSION_SERVICE_MODEL_FINGERPRINT_H_
#define KVSESSION_SERVICE_MODEL_FINGERPRINT_H_

#include <string>

#include "absl/status/statusor.h"

namespace kvs {

absl::StatusOr<std::string> FingerprintFile(const std::string& path);

}  // namespace kvs

#endif  // KVSESSION_SERVICE_MODEL_FINGERPRINT_H_
