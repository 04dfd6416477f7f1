// Error handling. User errors (a bad model, an unsupported op, a shape mismatch) are thrown as gaf::Error with a
// message that names the node or field and says what to do; the CLI and tools catch them and print one line.
// Broken invariants (a bug in graph-autofusion) are GAF_ASSERT failures that abort with file and line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace gaf {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An op, dtype or attribute value the runtime does not implement. Counted apart in the conformance suite.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

template <class... Args>
[[noreturn]] void unsupported(fmt::format_string<Args...> f, Args&&... args) {
  throw UnsupportedError(fmt::format(f, std::forward<Args>(args)...));
}

[[noreturn]] void assert_fail(const char* cond, const char* file, int line, const std::string& msg);

// A third-party library's exception text without its leading tag ("[json.exception.parse_error.101] syntax
// error ..." -> "syntax error ..."), for quoting in a gaf::Error.
std::string library_message(const std::exception& e);

// The name in `names` nearest to `want` (edit distance, ignoring case), for "did you mean" in an error; "" when none
// is near enough to be a plausible typo.
std::string closest_name(const std::string& want, const std::vector<std::string>& names);
// " (did you mean 'X'?)" for closest_name, or "".
std::string did_you_mean(const std::string& want, const std::vector<std::string>& names);

}  // namespace gaf

// User-facing check: throws gaf::Error with the formatted message.
#define GAF_CHECK(cond, ...)         \
  do {                               \
    if (!(cond)) ::gaf::fail(__VA_ARGS__); \
  } while (0)

// Internal invariant: aborts.
#define GAF_ASSERT(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) ::gaf::assert_fail(#cond, __FILE__, __LINE__, std::string{__VA_ARGS__}); \
  } while (0)
