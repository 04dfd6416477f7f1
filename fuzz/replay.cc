// Runs a fuzz target without libFuzzer (any compiler; what CI runs): every file given, then `mutations`
// deterministic variants of each (bytes flipped, inserted, deleted, the file cut short), each through
// LLVMFuzzerTestOneInput. A finding aborts, as under libFuzzer.
//   gaf_fuzz_replay_<target> [--mutations N] FILE|DIR...
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// With GAF_FUZZ_LAST=FILE each input is written there before it runs: after a finding, FILE reproduces it.
void feed(const std::string& bytes) {
  if (const char* last = std::getenv("GAF_FUZZ_LAST"))
    std::ofstream(last, std::ios::binary | std::ios::trunc) << bytes;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string mutate(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng() % s.size();
    switch (rng() % 5) {
      case 0:
        s[at] = char(s[at] ^ (1 << (rng() % 8)));
        break;  // flip a bit
      case 1:
        s[at] = char(rng());
        break;  // a random byte
      case 2:
        s.insert(at, 1, char(rng()));
        break;  // insert one
      case 3:
        s.erase(at, 1 + rng() % std::min<size_t>(16, s.size() - at));
        break;  // delete a run
      default:
        s.resize(at);
        break;  // cut short
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int mutations = 0;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) {
      mutations = std::stoi(argv[++i]);
    } else if (fs::is_directory(a)) {
      for (const auto& e : fs::recursive_directory_iterator(a))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(a);
    }
  }
  std::mt19937_64 rng(20261204);
  size_t inputs = 0;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    feed(bytes);
    ++inputs;
    for (int m = 0; m < mutations; ++m, ++inputs) feed(mutate(bytes, rng));
  }
  std::printf("fuzz replay: %zu inputs from %zu files, no finding\n", inputs, files.size());
  return files.empty() ? 1 : 0;
}
