// Test helper: one call of any method with request bytes as they are
// (grpc::GenericStub), so tests and the request fuzzer can send what no
// generated stub would: invalid UTF-8 in string fields, garbage, several
// request messages or none. Synchronous; one call per invocation.
#ifndef KVSESSION_TESTS_RAW_CALL_H_
#define KVSESSION_TESTS_RAW_CALL_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

namespace kvs {

struct RawReply {
  grpc::Status status;
  std::vector<std::string> messages;  // response messages, serialized
};

inline std::string RawBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// Calls `method` ("/kvsession.v1.KvSession/GetSession") with each of
// `requests` as one request message (none: the client half-closes at once),
// reads every response and the status, within `timeout`.
inline RawReply RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                        const std::vector<std::string>& requests,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::CompletionQueue cq;
  // One operation in flight at a time: start it, then wait for its tag.
  auto wait = [&cq] {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok;
  };
  RawReply reply;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&ctx, method, &cq);
  call->StartCall(nullptr);
  bool ok = wait();
  for (size_t i = 0; ok && i < requests.size(); ++i) {
    grpc::Slice slice(requests[i]);
    grpc::ByteBuffer bytes(&slice, 1);
    call->Write(bytes, nullptr);
    ok = wait();
  }
  if (ok) {
    call->WritesDone(nullptr);
    ok = wait();
  }
  for (;;) {
    grpc::ByteBuffer message;
    call->Read(&message, nullptr);
    if (!wait()) break;
    reply.messages.push_back(RawBytes(message));
  }
  call->Finish(&reply.status, nullptr);
  wait();
  cq.Shutdown();
  void* tag = nullptr;
  bool drained = false;
  while (cq.Next(&tag, &drained)) {
  }
  return reply;
}

inline std::string KvSessionMethod(const std::string& name) { return "/kvsession.v1.KvSession/" + name; }

}  // namespace kvs

#endif  // KVSESSION_TESTS_RAW_CALL_H_
