#include "loop/questions.h"

namespace keel::loop {

Questions::~Questions() {
  {
    std::lock_guard hold(m_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Questions::post(Key key, std::function<Result<void>()> ask) {
  {
    std::lock_guard hold(m_);
    if (open_.contains(key) || answers_.contains(key)) return;
    open_.insert(key);
    queue_.emplace_back(key, std::move(ask));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

std::optional<Result<void>> Questions::take(const Key& key) {
  std::lock_guard hold(m_);
  auto a = answers_.find(key);
  if (a == answers_.end()) return std::nullopt;
  Result<void> r = std::move(a->second);
  answers_.erase(a);
  return r;
}

bool Questions::pending(const Key& key) const {
  std::lock_guard hold(m_);
  return open_.contains(key);
}

void Questions::drain() {
  std::unique_lock hold(m_);
  answered_.wait(hold, [&] { return open_.empty() || stop_; });
}

void Questions::run() {
  std::unique_lock hold(m_);
  for (;;) {
    wake_.wait(hold, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto [key, ask] = std::move(queue_.front());
    queue_.pop_front();
    hold.unlock();
    Result<void> r = ask();
    hold.lock();
    open_.erase(key);
    if (answers_.size() < 4096) answers_.insert_or_assign(key, std::move(r));
    answered_.notify_all();
  }
}

}  // namespace keel::loop
