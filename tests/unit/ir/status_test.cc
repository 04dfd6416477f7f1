// The helpers errors are written with: a library's tag dropped from its message, the nearest name for a typo.
#include "gaf/status.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gaf {
namespace {

TEST(LibraryMessage, DropsALeadingTag) {
  EXPECT_EQ(library_message(std::runtime_error("[json.exception.parse_error.101] parse error at line 1")),
            "parse error at line 1");
  // Only a leading tag of one word: brackets elsewhere, or a bracketed phrase, are the message.
  EXPECT_EQ(library_message(std::runtime_error("shape [2,3] differs")), "shape [2,3] differs");
  EXPECT_EQ(library_message(std::runtime_error("[a phrase] stays")), "[a phrase] stays");
  EXPECT_EQ(library_message(std::runtime_error("[unclosed tag")), "[unclosed tag");
}

TEST(ClosestName, ProposesATypoFixOnly) {
  const std::vector<std::string> names = {"MatMul", "Gelu", "LayerNormalization"};
  EXPECT_EQ(closest_name("Matmul", names), "MatMul");
  EXPECT_EQ(did_you_mean("Gelu2", names), " (did you mean 'Gelu'?)");
  EXPECT_EQ(closest_name("Convolution", names), "");
  EXPECT_EQ(did_you_mean("Convolution", names), "");
}

}  // namespace
}  // namespace gaf
