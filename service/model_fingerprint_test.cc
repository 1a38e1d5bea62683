// FingerprintFile: the SHA-256 of the whole model file, its errors, and a
// hash stopped part-way (start-up's failed model load).
#include "service/model_fingerprint.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stop_token>
#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace kvs {
namespace {

// A file of `bytes` under the test's temporary directory, named for this
// process (the sanitizer builds' runs may share the directory).
std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/model_fingerprint_test_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(ModelFingerprintTest, TheFingerprintIsTheSha256OfTheWholeFile) {
  // FIPS 180-2's example: SHA-256("abc").
  const std::string abc_path = WriteFile("abc", "abc");
  absl::StatusOr<std::string> abc = FingerprintFile(abc_path);
  std::filesystem::remove(abc_path);
  ASSERT_TRUE(abc.ok()) << abc.status();
  EXPECT_EQ(absl::BytesToHexString(*abc), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

  // A file of several 1 MiB pieces and a partial one, against OpenSSL's
  // one-shot digest of the same bytes.
  std::string big(3 * (1 << 20) + 5, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  unsigned char want[EVP_MAX_MD_SIZE];
  unsigned int want_len = 0;
  ASSERT_EQ(EVP_Digest(big.data(), big.size(), want, &want_len, EVP_sha256(), nullptr), 1);
  const std::string path = WriteFile("big", big);
  absl::StatusOr<std::string> got = FingerprintFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string(reinterpret_cast<char*>(want), want_len));
  std::filesystem::remove(path);
}

TEST(ModelFingerprintTest, AFileThatCannotBeOpenedIsNotFound) {
  absl::StatusOr<std::string> got = FingerprintFile(::testing::TempDir() + "/model_fingerprint_test_absent.gguf");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
}

TEST(ModelFingerprintTest, AStoppedHashIsCancelledAndGivesNoFingerprint) {
  const std::string path = WriteFile("stopped", std::string(2 << 20, 'x'));
  std::stop_source stop;
  stop.request_stop();
  absl::StatusOr<std::string> got = FingerprintFile(path, stop.get_token());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
  // The same file, not stopped, hashes.
  EXPECT_TRUE(FingerprintFile(path).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kvs
