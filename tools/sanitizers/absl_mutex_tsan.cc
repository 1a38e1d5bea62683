// ThreadSanitizer annotations for Debian's (uninstrumented) absl::Mutex.
//
// Linked into every executable of the TSan build (KVS_SANITIZE=thread, see
// cmake/sanitizers.cmake) and nowhere else. Debian builds libabsl_synchronization
// without -fsanitize=thread, so its lock words are invisible to TSan and every
// absl::Mutex would look like no lock at all. This file defines the exported
// absl::Mutex / absl::CondVar entry points in the executable; the dynamic
// linker then binds every caller (our code, and Debian's gRPC) to these
// definitions, which tell TSan about the acquire/release through its public
// annotation interface (<sanitizer/tsan_interface.h>, the same calls absl makes
// when it is itself built with TSan) and forward to the real function found
// with dlsym(RTLD_NEXT).
//
// absl evaluates a Condition while the lock is really held but, to TSan,
// inside a call that has released it (the waiter in Await, or the unlocking
// thread on the waiter's behalf), so conditions are evaluated with TSan
// ignoring their reads; the acquire announced when the call returns orders
// everything the waiter does next.
//
// Limits: Await/CondVar::Wait are announced as releasing and re-acquiring an
// exclusive hold (the project never waits under a reader lock). A symbol that
// cannot be found aborts at first use with its name.
//
// Thread safety: each forwarder is resolved once (function-local static).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"

#define KVS_STR2(x) #x
#define KVS_STR(x) KVS_STR2(x)

namespace {

// The Itanium-mangled name of absl::<inline namespace>::<rest>, e.g.
// Mangled("5Mutex4LockEv") for absl::Mutex::Lock().
std::string Mangled(const char* rest) {
  const std::string ns = KVS_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return "_ZN4absl" + std::to_string(ns.size()) + ns + rest;
}

template <typename Fn>
Fn Real(const char* rest) {
  const std::string name = Mangled(rest);
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan: %s not found in the absl libraries\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

using Mu = absl::Mutex;
using Cond = absl::Condition;

// Announce to TSan that the calling thread gives up / takes `mu` exclusively.
void AnnounceRelease(Mu* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
}
void AnnounceAcquire(Mu* mu) {
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);

// A Condition that evaluates `user` with TSan ignoring its reads. It is
// built with absl's void* constructor, so the reads of the Condition object
// itself happen in absl's (uninstrumented) code, and Eval is not
// instrumented either: the unlocking thread evaluates a waiter's condition
// after it has released the lock (to TSan), and the waiter's stack, where
// the condition lives, is reused once the waiter returns.
struct QuietCondition {
  const Cond* user;
  __attribute__((no_sanitize("thread"))) static bool Eval(void* arg) {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    const bool r = static_cast<QuietCondition*>(arg)->user->Eval();
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return r;
  }
};

}  // namespace

#define KVS_QUIET(cond) \
  QuietCondition quiet{&(cond)}; \
  const Cond quiet_cond(&QuietCondition::Eval, static_cast<void*>(&quiet))

// Only the outermost wrapper on a thread talks to TSan: the real functions
// call one another through the PLT (Debian's CondVar::WaitWithTimeout calls
// WaitWithDeadline, which lands in our wrapper again), and announcing the
// inner call too would release a lock TSan no longer sees held.
thread_local int t_wrapper_depth = 0;
class OutermostCall {
 public:
  OutermostCall() : outer_(t_wrapper_depth++ == 0) {}
  ~OutermostCall() { --t_wrapper_depth; }
  OutermostCall(const OutermostCall&) = delete;
  OutermostCall& operator=(const OutermostCall&) = delete;
  bool outer() const { return outer_; }

 private:
  const bool outer_;
};

#define KVS_REAL(type, mangled)                          \
  static const auto real = Real<type>(mangled);          \
  const OutermostCall call

void absl::Mutex::Lock() {
  KVS_REAL(void (*)(Mu*), "5Mutex4LockEv");
  if (call.outer()) __tsan_mutex_pre_lock(this, 0);
  real(this);
  if (call.outer()) __tsan_mutex_post_lock(this, 0, 0);
}

bool absl::Mutex::TryLock() {
  KVS_REAL(bool (*)(Mu*), "5Mutex7TryLockEv");
  if (call.outer()) __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  if (call.outer()) __tsan_mutex_post_lock(this, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock_failed, 0);
  return locked;
}

void absl::Mutex::Unlock() {
  KVS_REAL(void (*)(Mu*), "5Mutex6UnlockEv");
  if (call.outer()) __tsan_mutex_pre_unlock(this, 0);
  real(this);
  if (call.outer()) __tsan_mutex_post_unlock(this, 0);
}

void absl::Mutex::ReaderLock() {
  KVS_REAL(void (*)(Mu*), "5Mutex10ReaderLockEv");
  if (call.outer()) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  if (call.outer()) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool absl::Mutex::ReaderTryLock() {
  KVS_REAL(bool (*)(Mu*), "5Mutex13ReaderTryLockEv");
  if (call.outer()) __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  const bool locked = real(this);
  if (call.outer()) __tsan_mutex_post_lock(
      this, locked ? __tsan_mutex_try_read_lock : __tsan_mutex_try_read_lock_failed, 0);
  return locked;
}

void absl::Mutex::ReaderUnlock() {
  KVS_REAL(void (*)(Mu*), "5Mutex12ReaderUnlockEv");
  if (call.outer()) __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  if (call.outer()) __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

void absl::Mutex::LockWhen(const Cond& cond) {
  KVS_REAL(void (*)(Mu*, const Cond&), "5Mutex8LockWhenERKNS0_9ConditionE");
  KVS_QUIET(cond);
  if (call.outer()) __tsan_mutex_pre_lock(this, 0);
  real(this, quiet_cond);
  if (call.outer()) __tsan_mutex_post_lock(this, 0, 0);
}

void absl::Mutex::ReaderLockWhen(const Cond& cond) {
  KVS_REAL(void (*)(Mu*, const Cond&), "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  KVS_QUIET(cond);
  if (call.outer()) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, quiet_cond);
  if (call.outer()) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool absl::Mutex::LockWhenWithTimeout(const Cond& cond, absl::Duration timeout) {
  KVS_REAL(bool (*)(Mu*, const Cond&, absl::Duration),
           "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  KVS_QUIET(cond);
  if (call.outer()) __tsan_mutex_pre_lock(this, 0);
  const bool r = real(this, quiet_cond, timeout);
  if (call.outer()) __tsan_mutex_post_lock(this, 0, 0);
  return r;
}

bool absl::Mutex::LockWhenWithDeadline(const Cond& cond, absl::Time deadline) {
  KVS_REAL(bool (*)(Mu*, const Cond&, absl::Time),
           "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  KVS_QUIET(cond);
  if (call.outer()) __tsan_mutex_pre_lock(this, 0);
  const bool r = real(this, quiet_cond, deadline);
  if (call.outer()) __tsan_mutex_post_lock(this, 0, 0);
  return r;
}

bool absl::Mutex::ReaderLockWhenWithTimeout(const Cond& cond, absl::Duration timeout) {
  KVS_REAL(bool (*)(Mu*, const Cond&, absl::Duration),
           "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  KVS_QUIET(cond);
  if (call.outer()) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool r = real(this, quiet_cond, timeout);
  if (call.outer()) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return r;
}

bool absl::Mutex::ReaderLockWhenWithDeadline(const Cond& cond, absl::Time deadline) {
  KVS_REAL(bool (*)(Mu*, const Cond&, absl::Time),
           "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  KVS_QUIET(cond);
  if (call.outer()) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool r = real(this, quiet_cond, deadline);
  if (call.outer()) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return r;
}

void absl::Mutex::Await(const Cond& cond) {
  KVS_REAL(void (*)(Mu*, const Cond&), "5Mutex5AwaitERKNS0_9ConditionE");
  KVS_QUIET(cond);
  if (call.outer()) AnnounceRelease(this);
  real(this, quiet_cond);
  if (call.outer()) AnnounceAcquire(this);
}

bool absl::Mutex::AwaitWithTimeout(const Cond& cond, absl::Duration timeout) {
  KVS_REAL(bool (*)(Mu*, const Cond&, absl::Duration),
           "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  KVS_QUIET(cond);
  if (call.outer()) AnnounceRelease(this);
  const bool r = real(this, quiet_cond, timeout);
  if (call.outer()) AnnounceAcquire(this);
  return r;
}

bool absl::Mutex::AwaitWithDeadline(const Cond& cond, absl::Time deadline) {
  KVS_REAL(bool (*)(Mu*, const Cond&, absl::Time),
           "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  KVS_QUIET(cond);
  if (call.outer()) AnnounceRelease(this);
  const bool r = real(this, quiet_cond, deadline);
  if (call.outer()) AnnounceAcquire(this);
  return r;
}

absl::Mutex::~Mutex() {
  KVS_REAL(void (*)(Mu*), "5MutexD1Ev");
  __tsan_mutex_destroy(this, __tsan_mutex_not_static);
  real(this);
}

void absl::CondVar::Wait(Mu* mu) {
  KVS_REAL(void (*)(absl::CondVar*, Mu*), "7CondVar4WaitEPNS0_5MutexE");
  if (call.outer()) AnnounceRelease(mu);
  real(this, mu);
  if (call.outer()) AnnounceAcquire(mu);
}

bool absl::CondVar::WaitWithTimeout(Mu* mu, absl::Duration timeout) {
  KVS_REAL(bool (*)(absl::CondVar*, Mu*, absl::Duration),
           "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  if (call.outer()) AnnounceRelease(mu);
  const bool r = real(this, mu, timeout);
  if (call.outer()) AnnounceAcquire(mu);
  return r;
}

bool absl::CondVar::WaitWithDeadline(Mu* mu, absl::Time deadline) {
  KVS_REAL(bool (*)(absl::CondVar*, Mu*, absl::Time),
           "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  if (call.outer()) AnnounceRelease(mu);
  const bool r = real(this, mu, deadline);
  if (call.outer()) AnnounceAcquire(mu);
  return r;
}
