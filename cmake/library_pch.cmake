# The precompiled header of the libraries that serve or call the gRPC API
# (kvs_service, kvs_metrics_server, kvs_client, kvs_cli, kvs_load); the
# test binaries have their own (cmake/test_pch.cmake). -DKVS_PCH=OFF builds
# without either.
#
# Their files parse gRPC, the generated kvsession.v1 API, RocksDB and
# Abseil before their own first line: 3-4 s of each file's compile time
# with GCC 12 on Zen 3 (service/session_manager.cc 9.6 -> 6.9 s,
# client/remote_commands.cc 21.2 -> 17.4 s), paid by ~50 files in each of
# CI's three builds. kvs_library_pch compiles those headers once per build
# and each library reuses the result (REUSE_FROM).
#
# What goes in: headers from Debian packages and the generated API only,
# never a header of this project, so editing the project recompiles no more
# files than before. A file still includes what it uses.
#
# A static library, as its users are: the header is compiled with their
# code-generation flags (-fPIC). Reuse needs the same flags and the same
# predefined macros in the header's target and its users: -pthread (which
# defines _REENTRANT) is given to all of them here, whatever their other
# libraries bring. Macros only some users define (kvs_load's
# KVS_BINARY_DIR, cpp-httplib's) are not read by these headers.
if(KVS_PCH)
  add_library(kvs_library_pch STATIC ${CMAKE_SOURCE_DIR}/cmake/library_pch.cc)
  target_link_libraries(kvs_library_pch PRIVATE kvs_proto RocksDB::rocksdb absl::status
      absl::statusor absl::strings absl::str_format absl::synchronization absl::time)
  target_compile_options(kvs_library_pch PRIVATE -pthread)
  target_precompile_headers(kvs_library_pch PRIVATE
      <algorithm> <atomic> <chrono> <cstdint> <cstring> <functional> <map> <memory>
      <optional> <string> <string_view> <vector>
      <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
      <absl/strings/str_format.h> <absl/synchronization/mutex.h> <absl/time/time.h>
      <grpcpp/grpcpp.h> <kvsession/v1/kvsession.grpc.pb.h> <rocksdb/db.h>)
endif()

# kvs_library_use_pch(<target>): compiles library <target> with
# kvs_library_pch's header.
function(kvs_library_use_pch target)
  if(KVS_PCH)
    target_compile_options(${target} PRIVATE -pthread)
    target_precompile_headers(${target} REUSE_FROM kvs_library_pch)
  endif()
endfunction()
