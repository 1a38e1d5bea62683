# The tokenizer module (included from model/CMakeLists.txt): text <-> token
# ids for GGUF vocabularies. SentencePiece-style ("llama") and byte-level BPE
# ("gpt2") families; the BPE pre-tokenizer regexes run on PCRE2 (UTF + UCP).
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

add_library(kvs_tokenizer
  bpe_tokenizer.cc
  pretokenizer.cc
  spm_tokenizer.cc
  tokenizer.cc
  utf8.cc
)
target_include_directories(kvs_tokenizer PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(kvs_tokenizer
  PUBLIC kvs_gguf absl::status absl::statusor absl::strings absl::str_format absl::flat_hash_map
  PRIVATE PkgConfig::PCRE2)

kvs_test(tokenizer_test SOURCES tokenizer_test.cc LIBS kvs_tokenizer kvs_gguf)
