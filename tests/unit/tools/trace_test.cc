// profile --trace: the profiled runs' node executions as a Chrome trace (Perfetto, chrome://tracing).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"

namespace gaf {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / fmt::format("gaf_trace_{}_{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

tools::FuseOptions opts() {
  tools::FuseOptions o;
  o.fusion.opt_level = 2;
  return o;
}

TEST(Trace, ProfileWritesOneCompleteEventPerNodeExecution) {
  Model m = tools::demo_transformer_block(16, 32, 2, 64);
  Model fused = tools::copy_model(m);
  tools::fuse_model(fused, opts());
  std::set<std::string> groups;
  for (const Node* n : fused.graph->nodes())
    if (n->body) groups.insert(n->name);
  ASSERT_FALSE(groups.empty());
  const size_t unfused_nodes = m.graph->nodes().size(), fused_nodes = fused.graph->nodes().size();
  ASSERT_LT(fused_nodes, unfused_nodes);

  const int iterations = 3;
  fs::path dir = fresh_dir("events");
  fs::path path = dir / "t.json";
  std::string text =
      tools::profile_fusion(m, opts(), tools::random_inputs(*m.graph, 1), iterations, 0, path.string());
  EXPECT_NE(text.find("== unfused"), std::string::npos);
  EXPECT_NE(text.find("== fused"), std::string::npos);
  std::vector<fs::path> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path());
  EXPECT_EQ(left, std::vector<fs::path>{path}) << "only the trace, no temporaries";

  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<int, std::string> process;
  std::map<int, std::vector<nlohmann::json>> x;  // pid -> complete events in file order
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["ts"].get<double>(), 0) << e.dump();
    EXPECT_GE(e["dur"].get<double>(), 0) << e.dump();
    EXPECT_TRUE(e["args"].contains("op_type")) << e.dump();
    EXPECT_TRUE(e["args"].contains("input_bytes")) << e.dump();
    EXPECT_TRUE(e["args"].contains("output_bytes")) << e.dump();
    x[e["pid"].get<int>()].push_back(e);
  }
  EXPECT_EQ(process, (std::map<int, std::string>{{1, "unfused"}, {2, "fused"}}));
  ASSERT_EQ(x[1].size(), unfused_nodes * iterations);
  ASSERT_EQ(x[2].size(), fused_nodes * iterations);
  EXPECT_LT(x[2].size() / iterations, x[1].size() / iterations);

  for (const auto& [pid, events] : x) {
    std::map<int, int> per_iteration;
    for (size_t i = 0; i < events.size(); ++i) {
      per_iteration[events[i]["args"]["iteration"].get<int>()]++;
      EXPECT_EQ(events[i]["tid"], events[0]["tid"]) << "one track per process";
      if (i == 0) continue;
      const double prev_end = events[i - 1]["ts"].get<double>() + events[i - 1]["dur"].get<double>();
      EXPECT_GE(events[i]["ts"].get<double>(), prev_end - 1e-3)  // 1 ns of rounding
          << "pid " << pid << ": " << events[i - 1].dump() << " overlaps " << events[i].dump();
    }
    EXPECT_EQ(per_iteration.size(), size_t(iterations));
    for (const auto& [it, n] : per_iteration) EXPECT_EQ(size_t(n), pid == 1 ? unfused_nodes : fused_nodes);
  }

  int fused_events = 0;
  for (const auto& e : x[2]) {
    if (e["cat"] != "fused") continue;
    ++fused_events;
    EXPECT_TRUE(groups.count(e["name"].get<std::string>())) << e.dump();
    ASSERT_TRUE(e["args"]["members"].is_array()) << e.dump();
    EXPECT_GE(e["args"]["members"].size(), 1u) << e.dump();
    EXPECT_GT(e["args"]["output_bytes"].get<size_t>(), 0u) << e.dump();
  }
  EXPECT_EQ(fused_events, int(groups.size()) * iterations);
  for (const auto& e : x[1]) EXPECT_FALSE(e["args"].contains("members")) << e.dump();
  fs::remove_all(dir);
}

TEST(Trace, WithoutATracePathNothingIsWritten) {
  Model m = tools::demo_transformer_block(16, 32, 2, 64);
  fs::path dir = fresh_dir("none");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  std::string a = tools::profile_fusion(m, opts(), tools::random_inputs(*m.graph, 1), 1, 5);
  std::string b = tools::profile_fusion(m, opts(), tools::random_inputs(*m.graph, 1), 1, 5, "");
  fs::current_path(cwd);
  EXPECT_TRUE(fs::is_empty(dir));
  EXPECT_NE(a.find("by op type"), std::string::npos);
  EXPECT_NE(b.find("by op type"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Trace, AnUnwritablePathIsOneErrorNamingIt) {
  Model m = tools::demo_transformer_block(16, 32, 2, 64);
  const std::string path = "/nonexistent-gaf-dir/t.json";
  try {
    tools::profile_fusion(m, opts(), tools::random_inputs(*m.graph, 1), 1, 5, path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace gaf
