// Placeholder (issue #5).
#include <gtest/gtest.h>
