#include "model/tokenizer.h"
#include <gtest/gtest.h>
TEST(Placeholder, Builds) {}
