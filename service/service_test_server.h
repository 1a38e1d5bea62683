// Test-only: the gRPC service of a ServiceTestEnv (service_test_env.h)
// served in this process on a loopback TCP port, with a real engine and
// executors, and a stub connected to it. For the service/ tests that need
// what the real kvsessiond binary cannot be made to do on demand, such as
// a store on a FaultInjectionFileSystem that holds writes
// (cache/fault_injection_fs.h). Everything else is the production code.
//
// Borrows the env, which must outlive it. Not thread-safe to build or
// destroy; the stub may be used from any thread.
#ifndef KVSESSION_SERVICE_SERVICE_TEST_SERVER_H_
#define KVSESSION_SERVICE_SERVICE_TEST_SERVER_H_

#include <memory>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kvsession/v1/kvsession.grpc.pb.h"
#include "service/engine.h"
#include "service/kvsession_service.h"
#include "service/service_test_env.h"
#include "service/task_executor.h"

namespace kvs {

class ServiceTestServer {
 public:
  explicit ServiceTestServer(ServiceTestEnv* env) {
    io_ = std::make_unique<TaskExecutor>(2);
    completions_ = std::make_unique<TaskExecutor>(2);
    EngineOptions options;
    options.threads = 1;
    engine_ = std::make_unique<Engine>(env->model(), &env->sessions(), completions_.get(), options);
    service_ = std::make_unique<KvSessionService>(
        env->model(), &env->sessions(), engine_.get(), io_.get(),
        ServerFacts{.version = "test", .model_path = ServiceTestEnv::ModelPath(), .kernels = "test",
                    .max_batch_tokens = options.max_batch_tokens, .chat_template = "", .replica = "test"});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    EXPECT_TRUE(server_ != nullptr && port != 0) << "the in-process server did not start";
    stub_ = kvsession::v1::KvSession::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  ~ServiceTestServer() {
    if (server_) server_->Shutdown();
    server_.reset();  // before the service it serves
    engine_->Stop();
    io_.reset();  // runs what was queued before the engine goes
    completions_.reset();
    service_.reset();
    engine_.reset();
  }

  kvsession::v1::KvSession::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<TaskExecutor> io_;
  std::unique_ptr<TaskExecutor> completions_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<KvSessionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<kvsession::v1::KvSession::Stub> stub_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_SERVICE_TEST_SERVER_H_
