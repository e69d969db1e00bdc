// Placeholder (issue #5).
#include "events/event_summary.h"
