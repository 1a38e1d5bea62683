// kvs-unread-generate: a test helper (tests/transport_limits_test.cc). It
// opens one Generate stream and never reads it, as a client that stalled
// would, then sleeps until killed. Its parent SIGSTOPs it to make it a
// client that vanished: it no longer answers the server's pings either.
//
//   kvs-unread-generate ADDRESS SESSION_ID API_KEY MAX_TOKENS
//
// Prints "open" on stdout once the call is started.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "kvsession/v1/kvsession.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: kvs-unread-generate ADDRESS SESSION_ID API_KEY MAX_TOKENS\n");
    return 2;
  }
  // A small stream window: the server's writes stop after a few KiB unread.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto stub = kvsession::v1::KvSession::NewStub(
      grpc::CreateCustomChannel(argv[1], grpc::InsecureChannelCredentials(), args));
  kvsession::v1::GenerateRequest request;
  request.set_session_id(argv[2]);
  request.set_max_tokens(std::atoi(argv[4]));
  request.set_ignore_eos(true);
  request.set_top_logprobs(20);  // a few hundred bytes a token
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + argv[3]);
  std::unique_ptr<grpc::ClientReader<kvsession::v1::GenerateResponse>> reader = stub->Generate(&context, request);
  std::printf("open\n");
  std::fflush(stdout);
  while (true) ::pause();
}
