// Taking over partitions from another instance (the prober, the instance worker): before acting
// on them, the local projection must hold what the previous owner produced. It flushed before
// giving the partitions up, so their high watermark now covers everything it wrote. The wait
// blocks on the projection runner's AppliedOffsets (no polling of the Store).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "consumers/kafka.h"
#include "projections/applied_offsets.h"

namespace dcm {

// Waits until `projection` has applied `partitions` of `topic` up to their current high
// watermarks, at most `timeout` and while `running` (whoever clears it calls applied.Wake()).
// Returns false (and logs a warning for `component`) when it gave up or a watermark was
// unknown: the caller then acts on the local state as it is.
bool WaitForCatchUp(const AppliedOffsets& applied, const Consumer& consumer,
                    const std::string& projection, const std::string& topic,
                    const std::vector<int32_t>& partitions, std::chrono::milliseconds timeout,
                    const std::atomic<bool>& running, const std::string& component);

}  // namespace dcm
