#include "src/http/response_stream.h"

#include <utility>

namespace dcm::http {

bool ResponseStream::Write(std::string_view bytes) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kOpen) return false;
    if (buffer_.size() + bytes.size() > max_buffered_) {
      state_ = State::kOverflow;  // cut off: always woken, so a write stuck on it is closed
      std::string().swap(buffer_);
      wake = std::exchange(wake_, nullptr);
      wake_armed_ = false;
    } else {
      buffer_.append(bytes);
      if (wake_armed_) {
        wake_armed_ = false;
        wake = wake_;
      }
    }
  }
  if (wake) wake();
  return state() == State::kOpen;
}

void ResponseStream::Close() { End(State::kClosed); }

void ResponseStream::CutOff() { End(State::kOverflow); }

void ResponseStream::End(State state) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kOpen) return;
    state_ = state;
    if (state == State::kOverflow) std::string().swap(buffer_);
    wake = std::exchange(wake_, nullptr);
    wake_armed_ = false;
  }
  if (wake) wake();
}

ResponseStream::State ResponseStream::Take(std::string* out) {
  out->clear();
  std::lock_guard lock(mu_);
  out->swap(buffer_);
  if (out->empty() && state_ == State::kOpen) wake_armed_ = true;
  if (!out->empty() && drain_armed_) {
    drain_armed_ = false;
    if (on_drained_) on_drained_();
  }
  return state_;
}

void ResponseStream::WaitForDrain() {
  std::lock_guard lock(mu_);
  drain_armed_ = true;
}

bool ResponseStream::WaitForDrainIfAbove(size_t bytes) {
  std::lock_guard lock(mu_);
  if (buffer_.size() <= bytes) return false;
  drain_armed_ = true;
  return true;
}

void ResponseStream::SetOnDrained(std::function<void()> on_drained) {
  std::lock_guard lock(mu_);
  on_drained_ = std::move(on_drained);
}

void ResponseStream::SetWake(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  wake_ = std::move(wake);
}

void ResponseStream::Detach() {
  std::lock_guard lock(mu_);
  if (state_ == State::kOpen) state_ = State::kDetached;
  std::string().swap(buffer_);
  wake_ = nullptr;
  wake_armed_ = false;
}

ResponseStream::State ResponseStream::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

size_t ResponseStream::buffered() const {
  std::lock_guard lock(mu_);
  return buffer_.size();
}

}  // namespace dcm::http
