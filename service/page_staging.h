// PageStaging: writes one engine job's newly full KV pages to the store
// while the job computes on, so that the persist that ends the job (and
// must finish before the call is answered) has only the last pages left
// to write. A 2,000-token prefill fills 125 pages of 1.8 MB (Qwen3-0.6B);
// written at the end they cost ~0.6 s of disk time on top of ~5.5 s of
// compute; staged, all but the last step's are written during compute.
//
// Each Stage call takes a pool reference on its pages (so copy-on-write
// keeps them as they are) and submits them to the TaskExecutor as one
// task per executor thread (pages dealt in turn), so the files are
// written, and synced, side by side; a task encodes each page and calls
// SessionStore::StagePage, then gives the references back. AfterStaged
// runs the job's final persist once every staging task has run, so the
// persist finds the last step's pages whole instead of writing them
// itself, one after another under the store's lock (a 512-token prompt is
// one step: all 32 of its pages are the last step's). Finish, called
// after that persist, ends the staging: the pages it staged that no
// record came to reference are deleted (DiscardStaged). Staging is an
// optimisation only: a failed StagePage (disk full) is ignored, and the
// final persist writes whatever is not staged, with its own errors.
//
// Ownership and threads: borrows the store, the pool and the executor,
// which must outlive every task (the engine drains its executor before
// they go). Stage is called from the engine's thread, Finish from any
// thread, once, after the last Stage, and so is AfterStaged, before
// Finish; the shared state the tasks update is guarded by a mutex.
#ifndef KVSESSION_SERVICE_PAGE_STAGING_H_
#define KVSESSION_SERVICE_PAGE_STAGING_H_

#include <functional>
#include <memory>

#include "cache/kv_geometry.h"
#include "cache/page_pool.h"
#include "cache/session_store.h"
#include "service/session.h"
#include "service/task_executor.h"

namespace kvs {

class PageStaging {
 public:
  PageStaging(SessionStore* store, PagePool* pool, TaskExecutor* io);

  // Stages full pages [first, end) of the session's KV, under the hashes
  // of its page hash chain (the ones its record will list).
  void Stage(const Session& session, int first, int end);
  // Runs `then` once every task the Stage calls so far submitted has run:
  // at once, on the caller's thread, when none is pending, else on the
  // executor thread that ran the last of them. Once per job, before
  // Finish; `then` must not block on the executor's other tasks.
  void AfterStaged(std::function<void()> then);
  // The job's final persist is done: discard what no record took.
  void Finish();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace kvs

#endif  // KVSESSION_SERVICE_PAGE_STAGING_H_
