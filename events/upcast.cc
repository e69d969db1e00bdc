// Placeholder (issue #5).
#include "events/upcast.h"
