// Placeholder (issue #5).
#include "consumers/event_reader.h"
