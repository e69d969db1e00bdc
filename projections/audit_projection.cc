// Placeholder (issue #5).
#include "projections/audit_projection.h"
