// ResponseStream: the body of a streamed response (Server-Sent Events, SPEC §9), between the
// producer that writes it (the watch hub, any thread) and the connection that sends it (the
// server's worker thread).
//
//   producer ── Write(bytes) ──▶ [buffer, at most `max_buffered` bytes] ──▶ Take ── connection
//                                     │ over the bound: cut off (kOverflow), buffer freed
//   producer ── Close() ──▶ kClosed        connection ── Detach() (peer gone) ──▶ Write false
//
// A reader that does not read is cut off once the bytes waiting for it exceed the bound: the
// producer never blocks and never holds more than the bound for one stream (plus the kernel's
// socket buffers). Write returns false once the stream is over for any reason, so the producer
// drops it. The connection is told of new bytes by the wake function it set (called at most once
// per empty-to-non-empty transition, and on close), outside the lock.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace dcm::http {

class ResponseStream {
 public:
  enum class State {
    kOpen,      // data may follow
    kClosed,    // the producer ended it: send what is left, then end the response
    kOverflow,  // the reader fell `max_buffered` behind: end it now
    kDetached,  // the connection went away
  };

  explicit ResponseStream(size_t max_buffered) : max_buffered_(max_buffered) {}

  // Appends `bytes`. False (nothing kept) once the stream is not open; a write that would pass
  // the bound cuts the stream off (kOverflow) and frees what was buffered.
  bool Write(std::string_view bytes);
  // The producer is done: the connection sends what is buffered and ends the response.
  void Close();
  // The producer gives up on a reader that does not read: as an overflow (kOverflow).
  void CutOff();

  // The producer stopped writing until the reader catches up: the next Take that moves bytes
  // calls the function given to SetOnDrained (on the connection's thread, under the stream's
  // lock: it must be quick and must not call the stream). SetOnDrained(nullptr) waits for a
  // call in progress, so after it the function is never called again.
  void WaitForDrain();
  // WaitForDrain if more than `bytes` are buffered (one check, so a Take in between is never
  // missed); whether it waits.
  bool WaitForDrainIfAbove(size_t bytes);
  void SetOnDrained(std::function<void()> on_drained);

  // Connection side. Moves the buffered bytes into `out` (cleared first) and returns the state.
  // When the buffer is empty and the stream open, the next Write calls `wake`.
  State Take(std::string* out);
  void SetWake(std::function<void()> wake);
  // The connection is gone: later Writes return false; the wake function is dropped.
  void Detach();

  State state() const;
  size_t buffered() const;

 private:
  void End(State state);

  const size_t max_buffered_;
  mutable std::mutex mu_;
  std::string buffer_;                // under mu_
  State state_ = State::kOpen;        // under mu_
  bool wake_armed_ = false;           // under mu_: the connection waits for the next Write
  std::function<void()> wake_;        // under mu_
  bool drain_armed_ = false;          // under mu_: the producer waits for the next Take
  std::function<void()> on_drained_;  // under mu_
};

}  // namespace dcm::http
