# The precompiled header every GoogleTest binary reuses (kvs_test in the
# top-level CMakeLists.txt; -DKVS_PCH=OFF builds without it).
#
# Parsing GoogleTest, gRPC, the generated kvsession.v1 API, nlohmann/json,
# RocksDB and Abseil was over half of a test file's compile time
# (tests/service_test.cc: 13 of 22 s on Zen 3), paid again by each of ~85
# test files in each of CI's builds. kvs_test_pch compiles those headers once
# per build; every test target reuses its result (REUSE_FROM), and the
# compiler puts it before the file's first line.
#
# What goes in: headers from Debian packages and the generated API only,
# never a header of this project, so editing the project recompiles no more
# tests than before. A test still includes what it uses; the precompiled
# header only makes that include free.
#
# Reuse needs the same compiler flags and macro definitions in the header's
# target as in every test: both take them from kvs_test_definitions(), and
# the macros other libraries bring to some tests (cpp-httplib's) are not read
# by these headers. Configure with -DCMAKE_CXX_FLAGS=-Winvalid-pch to see
# GCC say when it cannot use the header (the build still works, slower).
option(KVS_PCH "Precompile the headers shared by the test binaries" ON)

# kvs_test_definitions(<target>): the macros every test is compiled with
# (the shared data, build and source directories; -pthread's _REENTRANT, which
# gRPC's targets bring to some tests and not others) and its include paths
# (the source tree and the generated API, which the precompiled header names).
#
# Test files are compiled at -O1 in Release builds: the code under test is
# in the libraries, still -O2, and the tests' own code only drives it and
# compares. Their compile time is most of a test file's cost (template-heavy
# gRPC, gmock): -O1 took tests/service_test.cc from 15.6 to 11.4 s and
# tests/chat_service_test.cc from 21.2 to 15.3 s with GCC 12 on Zen 3. In the
# fuzz build (KVS_FUZZ) tests also go without the fuzzer's coverage
# instrumentation, which only the fuzz targets read; ASan and UBSan stay.
function(kvs_test_definitions target)
  target_compile_options(${target} PRIVATE -pthread $<$<CONFIG:Release>:-O1>)
  if(KVS_FUZZ)
    target_compile_options(${target} PRIVATE -fno-sanitize=fuzzer-no-link)
  endif()
  target_compile_definitions(${target} PRIVATE
      KVS_SHARED_DIR="${KVS_SHARED_DIR}"
      KVS_BINARY_DIR="${CMAKE_BINARY_DIR}"
      KVS_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}
      ${CMAKE_BINARY_DIR}/proto)
endfunction()

if(KVS_PCH)
  find_package(nlohmann_json REQUIRED)
  # An executable, as the tests are: the header is compiled with their
  # code-generation flags (-fPIE, not a library's -fPIC).
  add_executable(kvs_test_pch ${CMAKE_SOURCE_DIR}/cmake/test_pch.cc)
  target_link_libraries(kvs_test_pch PRIVATE kvs_proto GTest::gmock GTest::gtest
      nlohmann_json::nlohmann_json RocksDB::rocksdb absl::status absl::statusor
      absl::strings absl::str_format absl::synchronization absl::time)
  kvs_test_definitions(kvs_test_pch)
  target_precompile_headers(kvs_test_pch PRIVATE
      <algorithm> <atomic> <chrono> <cmath> <cstdint> <cstring> <filesystem>
      <fstream> <functional> <map> <memory> <optional> <random> <set>
      <string> <string_view> <thread> <vector>
      <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
      <absl/strings/str_format.h> <absl/synchronization/mutex.h>
      <absl/time/time.h>
      <gmock/gmock.h> <gtest/gtest.h>
      <grpcpp/grpcpp.h> <kvsession/v1/kvsession.grpc.pb.h>
      <nlohmann/json.hpp> <rocksdb/db.h>)
endif()

# kvs_test_use_pch(<target>): compiles <target> with kvs_test_pch's header.
function(kvs_test_use_pch target)
  if(KVS_PCH)
    target_precompile_headers(${target} REUSE_FROM kvs_test_pch)
  endif()
endfunction()
