// Placeholder (issue #5).
#include "consumers/rebuild.h"
