# The tokenizer module (included from model/CMakeLists.txt): text <-> token
# ids for GGUF vocabularies, SentencePiece-style ("llama") and byte-level BPE
# ("gpt2"), matching llama.cpp. The BPE pre-tokenizer regexes run on PCRE2
# in UTF + UCP mode (Debian package libpcre2-dev).
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
  PUBLIC kvs_gguf absl::status absl::statusor absl::flat_hash_map
  PRIVATE absl::strings absl::str_format PkgConfig::PCRE2)

kvs_test(tokenizer_test SOURCES tokenizer_test.cc LIBS kvs_tokenizer kvs_gguf absl::strings)
