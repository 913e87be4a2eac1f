// Questions to systemd asked off the tick thread: host/systemd.h's calls may wait up to their 5 s
// deadline, longer than a tick. One thread asks them in the order posted; the tick posts a question and
// takes its answer at a later tick.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "host/cgroup.h"
#include "host/error.h"
#include "host/systemd.h"

namespace keel::loop {

class Questions {
 public:
  using Key = std::pair<CgroupId, UnitProperty>;
  Questions() = default;
  Questions(const Questions&) = delete;
  Questions& operator=(const Questions&) = delete;
  // Waits for the question being asked (at most its deadline); those not asked yet are dropped.
  ~Questions();
  // Asked by the thread (started at the first question). A key already posted and not taken is not
  // posted again.
  void post(Key key, std::function<Result<void>()> ask);
  // Its answer once it came (taken: the key may be posted again); nullopt while pending or never posted.
  std::optional<Result<void>> take(const Key& key);
  bool pending(const Key& key) const;
  // Waits until every question posted has its answer (tests; a stop).
  void drain();

 private:
  void run();
  mutable std::mutex m_;
  std::condition_variable wake_, answered_;
  std::deque<std::pair<Key, std::function<Result<void>()>>> queue_;
  std::set<Key> open_;  // posted, not answered yet
  std::map<Key, Result<void>> answers_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace keel::loop
