#include "service/page_staging.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cache/page_codec.h"

namespace kvs {

struct PageStaging::State {
  SessionStore* store;
  PagePool* pool;
  TaskExecutor* io;

  absl::Mutex mu;
  int pending ABSL_GUARDED_BY(mu) = 0;  // submitted tasks not yet run
  bool finished ABSL_GUARDED_BY(mu) = false;
  std::vector<PageHash> staged ABSL_GUARDED_BY(mu);  // files StagePage wrote
  std::function<void()> after_staged ABSL_GUARDED_BY(mu);  // AfterStaged's, until run

  // After the final persist and the last task: DiscardStaged, once.
  void DiscardIfDone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!finished || pending > 0 || staged.empty()) return;
    store->DiscardStaged(staged);
    staged.clear();
  }
};

PageStaging::PageStaging(SessionStore* store, PagePool* pool, TaskExecutor* io)
    : state_(std::make_shared<State>()) {
  state_->store = store;
  state_->pool = pool;
  state_->io = io;
}

void PageStaging::Stage(const Session& session, int first, int end) {
  if (first >= end) return;
  struct Page {
    PageHash hash;
    PageId id;
    PageOwner owner;  // whose reference the staging holds
  };
  // Pages dealt in turn to one task per executor thread.
  const int tasks = std::clamp(state_->io->threads(), 1, end - first);
  std::vector<std::vector<Page>> dealt(static_cast<size_t>(tasks));
  for (int i = first; i < end; ++i) {
    const PageId id = session.kv->page_table()[i];
    state_->pool->AddRef(id, session.kv->owner());
    dealt[static_cast<size_t>((i - first) % tasks)].push_back(
        {session.page_hashes->hashes()[i], id, session.kv->owner()});
  }
  {
    absl::MutexLock lock(&state_->mu);
    state_->pending += tasks;
  }
  for (std::vector<Page>& pages : dealt) {
    state_->io->Submit([state = state_, pages = std::move(pages)] {
      const KvGeometry& g = state->pool->geometry();
      const size_t bytes = EncodedPageBytes(g, g.page_tokens);
      std::vector<PageHash> wrote;
      for (const Page& p : pages) {
        absl::StatusOr<bool> staged = state->store->StagePage(p.hash, bytes, [&] {
          return absl::StatusOr<PageEncoding>(EncodePageParts(g, state->pool->data(p.id), g.page_tokens));
        });
        state->pool->Release(p.id, p.owner);
        if (staged.ok() && *staged) wrote.push_back(p.hash);
      }
      std::function<void()> then;
      {
        absl::MutexLock lock(&state->mu);
        state->staged.insert(state->staged.end(), wrote.begin(), wrote.end());
        if (--state->pending == 0) then = std::exchange(state->after_staged, nullptr);
        state->DiscardIfDone();
      }
      if (then) then();
    });
  }
}

void PageStaging::AfterStaged(std::function<void()> then) {
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->pending > 0) {
      state_->after_staged = std::move(then);
      return;
    }
  }
  then();
}

void PageStaging::Finish() {
  absl::MutexLock lock(&state_->mu);
  state_->finished = true;
  state_->DiscardIfDone();
}

}  // namespace kvs
