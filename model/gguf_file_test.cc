// Tests for GgufFile: round trips through GgufWriter, the real models in
// ../shared, and hand-broken files (truncation at every byte, bad magic and
// versions, out-of-range offsets, overflowing shapes, oversized lengths).
#include "model/gguf_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf_writer.h"
#include "tests/scratch_dir.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

class GgufFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
    return path;
  }

  // A small valid file: a few metadata types and two F32 tensors.
  static GgufWriter SmallWriter() {
    GgufWriter w;
    w.AddString("general.architecture", "llama");
    w.AddUint32("llama.block_count", 2);
    w.AddFloat32("llama.rope.freq_base", 10000.0f);
    w.AddBool("tokenizer.ggml.add_bos_token", true);
    w.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
    w.AddFloat32Array("tokenizer.ggml.scores", {0.0f, -1.5f, -2.5f});
    w.AddInt32Array("tokenizer.ggml.token_type", {2, 1, 1});
    std::string a(4 * 8, '\0');
    for (int i = 0; i < 8; ++i) {
      float v = static_cast<float>(i) * 0.5f;
      std::memcpy(&a[4 * i], &v, 4);
    }
    w.AddTensor("a.weight", GgmlType::kF32, {4, 2}, a);
    w.AddTensor("b.weight", GgmlType::kF32, {3}, std::string(12, '\x01'));
    return w;
  }

  // Position of the u64 offset field of tensor `name` in a serialized file.
  static size_t OffsetFieldPos(const std::string& bytes, const std::string& name, int n_dims) {
    size_t p = bytes.find(name);
    EXPECT_NE(p, std::string::npos);
    return p + name.size() + 4 + 8 * n_dims + 4;
  }

  ScratchDir scratch_{"gguf_test"};
  const std::filesystem::path dir_ = scratch_.path();
};

TEST_F(GgufFileTest, RoundTripsMetadataAndTensors) {
  std::string path = Write("ok.gguf", SmallWriter().Serialize());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetUint("llama.block_count"), 2u);
  EXPECT_FLOAT_EQ(*f.GetFloat("llama.rope.freq_base"), 10000.0f);
  EXPECT_TRUE(*f.GetBool("tokenizer.ggml.add_bos_token"));
  auto tokens = f.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_THAT(**tokens, ::testing::ElementsAre("<unk>", "a", "bc"));
  EXPECT_THAT(*f.GetFloatArray("tokenizer.ggml.scores"), ::testing::ElementsAre(0.0f, -1.5f, -2.5f));
  EXPECT_THAT(*f.GetIntArray("tokenizer.ggml.token_type"), ::testing::ElementsAre(2, 1, 1));

  const GgufTensor* a = f.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->n_dims, 2);
  EXPECT_EQ(a->row_length(), 4);
  EXPECT_EQ(a->n_rows(), 2);
  EXPECT_EQ(a->n_bytes, 32u);
  float v5;
  std::memcpy(&v5, a->data + 5 * 4, 4);
  EXPECT_FLOAT_EQ(v5, 2.5f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % 32, 0u) << "tensor data must be aligned";
  EXPECT_EQ(f.FindTensor("missing"), nullptr);
}

TEST_F(GgufFileTest, GettersReportMissingKeysAndWrongTypes) {
  auto file = GgufFile::Open(Write("ok.gguf", SmallWriter().Serialize()));
  ASSERT_TRUE(file.ok());
  const GgufFile& f = **file;
  EXPECT_EQ(f.GetUint("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*f.GetUint("nope", 7), 7u);
  auto wrong = f.GetUint("general.architecture");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("general.architecture"));
  EXPECT_THAT(wrong.status().message(), HasSubstr("string"));
  EXPECT_FALSE(f.GetStringArray("tokenizer.ggml.scores").ok());
}

TEST_F(GgufFileTest, MissingFileIsNotFound) {
  auto file = GgufFile::Open((dir_ / "absent.gguf").string());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("absent.gguf"));
}

TEST_F(GgufFileTest, EveryTruncationIsAnErrorNamingTheFile) {
  std::string bytes = SmallWriter().Serialize();
  // The last tensor (12 bytes) is followed by 20 bytes of alignment padding
  // that no reader needs; every cut before that point removes needed bytes.
  size_t needed = bytes.size() - 20;
  for (size_t n = 0; n < needed; ++n) {
    std::string path = Write("trunc.gguf", bytes.substr(0, n));
    auto file = GgufFile::Open(path);
    ASSERT_FALSE(file.ok()) << "truncated to " << n << " bytes was accepted";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_THAT(file.status().message(), HasSubstr("trunc.gguf")) << n;
  }
}

TEST_F(GgufFileTest, RejectsBadMagicAndVersions) {
  std::string bytes = SmallWriter().Serialize();
  std::string bad = bytes;
  bad[0] = 'X';
  auto f1 = GgufFile::Open(Write("magic.gguf", bad));
  EXPECT_THAT(f1.status().message(), HasSubstr("bad magic"));

  bad = bytes;
  uint32_t v1 = 1;
  std::memcpy(&bad[4], &v1, 4);
  EXPECT_THAT(GgufFile::Open(Write("v1.gguf", bad)).status().message(), HasSubstr("version 1"));

  bad = bytes;
  uint32_t v9 = 9;
  std::memcpy(&bad[4], &v9, 4);
  EXPECT_THAT(GgufFile::Open(Write("v9.gguf", bad)).status().message(),
              HasSubstr("unsupported version 9"));
}

TEST_F(GgufFileTest, RejectsTensorOffsetOutOfRange) {
  std::string bytes = SmallWriter().Serialize();
  size_t pos = OffsetFieldPos(bytes, "b.weight", 1);
  uint64_t far = 1ull << 40;
  std::memcpy(&bytes[pos], &far, 8);
  auto file = GgufFile::Open(Write("offset.gguf", bytes));
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("'b.weight'"));
  EXPECT_THAT(file.status().message(), HasSubstr("past the end"));

  // An offset that wraps around when the size is added.
  uint64_t wrap = ~0ull - 31;
  std::memcpy(&bytes[pos], &wrap, 8);
  EXPECT_FALSE(GgufFile::Open(Write("wrap.gguf", bytes)).ok());
}

TEST_F(GgufFileTest, RejectsMisalignedAndOverlappingTensors) {
  std::string bytes = SmallWriter().Serialize();
  size_t pos = OffsetFieldPos(bytes, "b.weight", 1);
  uint64_t odd = 4;
  std::memcpy(&bytes[pos], &odd, 8);
  EXPECT_THAT(GgufFile::Open(Write("align.gguf", bytes)).status().message(),
              HasSubstr("not aligned"));
  uint64_t zero = 0;  // b.weight now overlaps a.weight
  std::memcpy(&bytes[pos], &zero, 8);
  EXPECT_THAT(GgufFile::Open(Write("overlap.gguf", bytes)).status().message(),
              HasSubstr("overlap"));
}

TEST_F(GgufFileTest, RejectsOverflowingAndInvalidShapes) {
  GgufWriter w;
  w.AddTensor("t", GgmlType::kF32, {1ll << 40, 1ll << 40}, std::string());
  std::string bytes = w.Serialize();
  EXPECT_THAT(GgufFile::Open(Write("overflow.gguf", bytes)).status().message(),
              HasSubstr("overflow"));

  GgufWriter w2;
  w2.AddTensor("q", GgmlType::kQ8_0, {33}, std::string(34 * 2, '\0'));
  EXPECT_THAT(GgufFile::Open(Write("block.gguf", w2.Serialize())).status().message(),
              HasSubstr("not a multiple"));

  GgufWriter w3;
  w3.AddTensor("z", GgmlType::kF32, {4}, std::string(16, '\0'));
  std::string b3 = w3.Serialize();
  size_t ndims_pos = b3.find("z") + 1;
  uint32_t five = 5;
  std::memcpy(&b3[ndims_pos], &five, 4);
  EXPECT_THAT(GgufFile::Open(Write("ndims.gguf", b3)).status().message(),
              HasSubstr("dimensions"));

  std::string b4 = w3.Serialize();
  uint32_t bad_type = 99;
  std::memcpy(&b4[ndims_pos + 4 + 8], &bad_type, 4);
  EXPECT_THAT(GgufFile::Open(Write("type.gguf", b4)).status().message(),
              HasSubstr("unknown ggml type 99"));
}

TEST_F(GgufFileTest, RejectsOversizedLengthsAndCounts) {
  std::string bytes = SmallWriter().Serialize();
  // The first key's string length field sits right after the 24-byte header.
  std::string bad = bytes;
  uint64_t huge = 1ull << 62;
  std::memcpy(&bad[24], &huge, 8);
  EXPECT_FALSE(GgufFile::Open(Write("strlen.gguf", bad)).ok());

  bad = bytes;
  std::memcpy(&bad[16], &huge, 8);  // metadata count
  EXPECT_THAT(GgufFile::Open(Write("kvcount.gguf", bad)).status().message(),
              HasSubstr("metadata count"));

  bad = bytes;
  std::memcpy(&bad[8], &huge, 8);  // tensor count
  EXPECT_THAT(GgufFile::Open(Write("tcount.gguf", bad)).status().message(),
              HasSubstr("tensor count"));

  // The string array's element count.
  bad = bytes;
  size_t p = bad.find("tokenizer.ggml.tokens") + std::strlen("tokenizer.ggml.tokens") + 4 + 4;
  std::memcpy(&bad[p], &huge, 8);
  EXPECT_THAT(GgufFile::Open(Write("arr.gguf", bad)).status().message(),
              HasSubstr("tokenizer.ggml.tokens"));
}

TEST_F(GgufFileTest, RejectsDuplicateKeysAndTensors) {
  GgufWriter w;
  w.AddUint32("k", 1);
  w.AddUint32("k", 2);
  EXPECT_THAT(GgufFile::Open(Write("dupkey.gguf", w.Serialize())).status().message(),
              HasSubstr("duplicate metadata key 'k'"));
  GgufWriter w2;
  w2.AddTensor("t", GgmlType::kF32, {1}, std::string(4, '\0'));
  w2.AddTensor("t", GgmlType::kF32, {1}, std::string(4, '\0'));
  EXPECT_THAT(GgufFile::Open(Write("duptensor.gguf", w2.Serialize())).status().message(),
              HasSubstr("duplicate tensor name 't'"));
}

TEST_F(GgufFileTest, ErrorsQuoteAtMost64BytesOfAKeyOrTensorNameFromTheFile) {
  const std::string key = "k\xff" + std::string(100000, 'z');
  GgufWriter w;
  w.AddUint32(key, 1);
  w.AddUint32(key, 2);
  absl::Status dup = GgufFile::Open(Write("longkey.gguf", w.Serialize())).status();
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dup.message()), HasSubstr("duplicate metadata key 'k\\xffzzz"));
  EXPECT_THAT(std::string(dup.message()), HasSubstr("...' (100002 bytes)"));
  EXPECT_LT(dup.message().size(), 400u);
  const std::string name(50000, 't');
  GgufWriter w2;
  w2.AddTensor(name, GgmlType::kF32, {1}, std::string(4, '\0'));
  w2.AddTensor(name, GgmlType::kF32, {1}, std::string(4, '\0'));
  absl::Status tensor = GgufFile::Open(Write("longtensor.gguf", w2.Serialize())).status();
  EXPECT_THAT(std::string(tensor.message()), HasSubstr("(50000 bytes)"));
  EXPECT_LT(tensor.message().size(), 400u);
  // Getters quote the key they were asked for the same way.
  auto file = GgufFile::Open(Write("ok.gguf", SmallWriter().Serialize()));
  ASSERT_TRUE(file.ok());
  absl::Status missing = (*file)->GetUint(std::string(10000, 'x')).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_LT(missing.message().size(), 400u);
}

TEST_F(GgufFileTest, RandomCorruptionNeverCrashes) {
  std::string bytes = SmallWriter().Serialize();
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) bad[rng() % bad.size()] = static_cast<char>(rng());
    auto file = GgufFile::Open(Write("fuzz.gguf", bad));
    if (file.ok()) {
      ++accepted;  // the flip hit tensor data or a value: everything must still be in bounds
      for (const GgufTensor& t : (*file)->tensors()) {
        ASSERT_LE(t.offset + t.n_bytes, (*file)->tensor_data_bytes()) << t.name;
      }
    }
  }
  EXPECT_LT(accepted, 2000);
}

TEST_F(GgufFileTest, OpensEverySharedModel) {
  std::filesystem::path models = std::filesystem::path(KVS_SHARED_DIR) / "models";
  if (!std::filesystem::exists(models)) GTEST_SKIP() << "../shared/models not present";
  int opened = 0;
  for (const auto& entry : std::filesystem::directory_iterator(models)) {
    if (entry.path().extension() != ".gguf") continue;
    auto file = GgufFile::Open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_TRUE((*file)->GetString("general.architecture").ok());
    EXPECT_NE((*file)->FindTensor("token_embd.weight"), nullptr);
    ++opened;
  }
  EXPECT_GE(opened, 4);
}

}  // namespace
}  // namespace kvs
