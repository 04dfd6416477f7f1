// Progress lines: off a terminal one plain line per tenth of the work (and the end), none when quiet.
#include <gtest/gtest.h>

#include <sstream>

#include "gaf/tools.h"

namespace gaf {
namespace {

TEST(Progress, PlainLinesPerTenthAndNoneWhenQuiet) {
  std::ostringstream os;
  tools::set_progress_stream(&os);
  {
    tools::Progress p("work", 100);
    for (int i = 0; i <= 100; ++i) p.step(i);
  }
  const std::string text = os.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 11) << text;  // 0, 10, ..., 100
  EXPECT_NE(text.find("work: 50/100\n"), std::string::npos) << text;
  EXPECT_NE(text.find("work: 100/100\n"), std::string::npos) << text;

  std::ostringstream quiet;
  tools::set_progress_stream(&quiet);
  tools::set_progress_quiet(true);
  {
    tools::Progress p("work", 10);
    for (int i = 0; i <= 10; ++i) p.step(i);
  }
  EXPECT_TRUE(quiet.str().empty()) << quiet.str();
  tools::set_progress_quiet(false);
  tools::set_progress_stream(nullptr);
}

}  // namespace
}  // namespace gaf
