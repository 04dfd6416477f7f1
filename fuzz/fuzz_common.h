// What every fuzz target checks: an input may be refused with one gaf::Error (a clear message naming what is
// wrong), never anything else. Any other exception, a crash or a sanitizer report is a finding.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "gaf/status.h"

namespace gaf::fuzz {

template <class F>
void expect_clean(F&& f) {
  static const bool verbose = std::getenv("GAF_FUZZ_VERBOSE") != nullptr;  // print each refusal
  try {
    f();
  } catch (const Error& e) {
    if (verbose) std::fprintf(stderr, "refused: %.200s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz finding: an exception that is not gaf::Error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace gaf::fuzz
