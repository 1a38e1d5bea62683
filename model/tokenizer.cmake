# The tokenizer module (included from model/CMakeLists.txt): text <-> token
# ids for GGUF vocabularies, SentencePiece-style ("llama") and byte-level BPE
# ("gpt2"), matching llama.cpp (and Hugging Face where they differ). The BPE pre-tokenizer regexes run on PCRE2
# in UTF + UCP mode (Debian package libpcre2-dev).
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# ICU (libicu-dev, ICU 72 = Unicode 15): NFC and the Unicode 15 character
# classes the pre-tokenizer regexes are rewritten to.
pkg_check_modules(ICU_UC REQUIRED IMPORTED_TARGET icu-uc)

add_library(kvs_tokenizer
  bpe_tokenizer.cc
  pretokenizer.cc
  spm_tokenizer.cc
  tokenizer.cc
  unicode_classes.cc
  utf8.cc
)
target_include_directories(kvs_tokenizer PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(kvs_tokenizer
  PUBLIC kvs_gguf absl::status absl::statusor absl::flat_hash_map
  PRIVATE absl::strings absl::str_format PkgConfig::PCRE2 PkgConfig::ICU_UC)

kvs_test(tokenizer_test SOURCES tokenizer_test.cc hf_parity_test.cc unicode_classes_test.cc
  pretokenizer_work_test.cc merge_queue_test.cc block_fifos_test.cc LIBS kvs_tokenizer kvs_gguf absl::strings)

# Chat templates: families recognised from `tokenizer.chat_template`,
# rendered to text and token ids.
add_library(kvs_chat_template
  chat_template.cc
  chat_template_family.cc
)
target_include_directories(kvs_chat_template PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(kvs_chat_template PUBLIC kvs_tokenizer kvs_gguf absl::status absl::statusor
  PRIVATE absl::strings)

kvs_test(chat_template_test SOURCES chat_template_test.cc chat_template_family_test.cc
  LIBS kvs_chat_template absl::strings)
