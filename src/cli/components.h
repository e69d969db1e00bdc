// Components: the pieces of `dcm serve` (store, producers, projection runners, instance worker,
// registrar, prober, HTTP server, ...) as a list started in order and stopped in reverse, the way
// nmos-cpp's main starts its servers. A component is built by its own factory
// (src/cli/serve_parts.cc) before anything starts; the list only knows how to start, stop and
// ask it whether it is ready.
//
//   built ──StartAll()──▶ started[0..k) ──StopAll()──▶ stopped (k-1 .. 0)
//                 └─ start k fails: StopAll() of 0..k-1, the error is returned
//
// Thread-safety: StartAll and StopAll on one thread (serve's main thread); the readiness checks
// are called from HTTP threads while the components run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/http/ops_handlers.h"

namespace dcm::cli {

struct Component {
  std::string name;                    // for logs
  std::function<Status()> start = {};  // null: nothing to start (a resource built by its factory)
  std::function<void()> stop = {};     // null: nothing to stop
  std::function<bool()> ready = {};    // null: not a /readyz check
  std::string check = {};              // the /readyz check's name (default: `name`)
  std::function<std::string()> detail = {};  // null or "": nothing to explain in /readyz
};

class Components {
 public:
  Components() = default;
  Components(const Components&) = delete;
  Components& operator=(const Components&) = delete;
  ~Components() { StopAll(); }

  void Add(Component component) { components_.push_back(std::move(component)); }

  // Starts each component in the order added. On the first error, stops the ones started (in
  // reverse) and returns that error unchanged.
  Status StartAll();
  // Stops the started components in reverse order. Idempotent.
  void StopAll();

  // The /readyz checks of every component that has one, in the order added.
  std::vector<http::ReadinessCheck> Checks() const;

 private:
  std::vector<Component> components_;
  size_t started_ = 0;
};

}  // namespace dcm::cli
