// kvs-bench-service --table grpc-prefill: the prefill of one prompt through
// a real kvsessiond over gRPC (CreateSession with the text, answered once the
// session is durable) against the same prefill in this process (what
// `kvsession run` does: a thread pool, chunks of 512 tokens), with the same
// model file, thread count and KV type, alternating A/B in one run (issue
// 11: within 10% of in-process at 512 and 2,000 tokens).
//
// Besides wall time it prints CPU seconds, which other load on a shared
// machine disturbs far less: the server's compute threads (engine and pool,
// named kvs-engine / kvs-compute), its other threads (persisting the KV:
// kvs-io and RocksDB; gRPC), and this process during the in-process prefill.
#ifndef KVSESSION_BENCH_GRPC_PREFILL_TABLE_H_
#define KVSESSION_BENCH_GRPC_PREFILL_TABLE_H_

#include <string>
#include <vector>

#include "kernels/kv_dtype.h"

namespace kvs {

struct GrpcPrefillOptions {
  std::string model;
  int threads = 0;  // 0: one per core (both sides)
  int repeats = 3;  // medians over these
  std::vector<int> lengths = {512, 2000};
  KvDtype kv_dtype = KvDtype::kF16;  // both sides' KV type (the server's --kv-type)
  std::vector<std::string> server_flags;  // extra kvsessiond flags
};

// Prints the table to stdout; returns a process exit code (0: the table was
// printed; a server that does not start or a failed call prints why and
// returns 1).
int RunGrpcPrefillTable(const GrpcPrefillOptions& options);

}  // namespace kvs

#endif  // KVSESSION_BENCH_GRPC_PREFILL_TABLE_H_
