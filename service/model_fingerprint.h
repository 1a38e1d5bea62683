// The model fingerprint: SHA-256 of the whole GGUF file (32 raw bytes).
// Sessions and KV page hashes record it, so a store is never read with a
// different model's weights, even one of the same shape.
//
// FingerprintFile reads the file in 1 MiB pieces. NOT_FOUND if it cannot
// be opened, INTERNAL on a read error, CANCELLED once `stop` is requested
// (checked before each piece): start-up hashes the file while the model
// loads and, if the load fails, stops the hash rather than waiting for the
// rest of a file of tens of gigabytes. Thread-safe.
#ifndef KVSESSION_SERVICE_MODEL_FINGERPRINT_H_
#define KVSESSION_SERVICE_MODEL_FINGERPRINT_H_

#include <stop_token>
#include <string>

#include "absl/status/statusor.h"

namespace kvs {

absl::StatusOr<std::string> FingerprintFile(const std::string& path, std::stop_token stop = {});

}  // namespace kvs

#endif  // KVSESSION_SERVICE_MODEL_FINGERPRINT_H_
