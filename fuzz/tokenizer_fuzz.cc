// libFuzzer target: Tokenizer encode and decode of arbitrary bytes
// (model/tokenizer.h) with real vocabularies from KVS_SHARED_DIR/vocab.
//
// Input: byte 0 picks the vocabulary and the flags, the rest is the text.
// Valid UTF-8 is encoded (as the service does after IsValidUtf8) and the ids
// must be in range; the same bytes read as int32 ids are decoded (any id,
// in range or not) and streamed through Utf8StreamDecoder, whose output must
// always be valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/tokenizer.h"

namespace {

// One of each family and of the pre-tokenizer kinds with their own
// patterns: SentencePiece (llama-spm, and phi-3 with its rstrip markers),
// byte-level BPE with the gpt2, qwen2, llama-bpe and deepseek-llm
// pre-tokenizers.
const char* const kVocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf",
                               "ggml-vocab-qwen3.gguf",     "ggml-vocab-llama3.gguf",
                               "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-phi-3.gguf"};

std::vector<std::unique_ptr<kvs::Tokenizer>> LoadTokenizers() {
  std::vector<std::unique_ptr<kvs::Tokenizer>> out;
  for (const char* name : kVocabs) {
    const std::string path = std::string(KVS_SHARED_DIR) + "/vocab/" + name;
    auto gguf = kvs::GgufFile::Open(path);
    if (!gguf.ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s\n", std::string(gguf.status().message()).c_str());
      std::abort();
    }
    auto tok = kvs::Tokenizer::FromGguf(**gguf);
    if (!tok.ok()) std::abort();
    out.push_back(*std::move(tok));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<kvs::Tokenizer>> tokenizers = LoadTokenizers();
  if (size == 0) return 0;
  const kvs::Tokenizer& tok = *tokenizers[data[0] % tokenizers.size()];
  const bool add_special = data[0] & 0x10, parse_special = data[0] & 0x20;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  if (kvs::IsValidUtf8(text)) {
    const std::vector<int32_t> ids = (data[0] & 0x40)
                                         ? tok.EncodeContinuation(text, parse_special)
                                         : tok.Encode(text, add_special, parse_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
    }
    (void)tok.Decode(ids);
  }

  std::vector<int32_t> ids(text.size() / sizeof(int32_t));
  if (!ids.empty()) std::memcpy(ids.data(), text.data(), ids.size() * sizeof(int32_t));
  (void)tok.Decode(ids);
  kvs::Utf8StreamDecoder stream;
  for (int32_t id : ids) {
    if (!kvs::IsValidUtf8(stream.Push(tok.Piece(id)))) __builtin_trap();
  }
  return 0;
}
