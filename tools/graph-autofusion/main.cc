// graph-autofusion command line: a thin layer over the library (gaf::tools). Every user error is one line on
// stderr and a non-zero exit.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace {

using namespace gaf;

struct RunArgs {
  std::string model;
  std::vector<std::string> input_pbs;
  std::string input_dir;
  bool random_inputs = false;
  std::string save_outputs;
  int iterations = 0;
  uint64_t seed = 0;
};

int cmd_info(const std::string& path) {
  Model m = onnx_io::load_model(path);
  std::cout << tools::model_info(m);
  return 0;
}

std::vector<Tensor> gather_inputs(const RunArgs& a, const runtime::Session& s) {
  std::vector<Tensor> inputs;
  if (!a.input_dir.empty()) inputs = tools::load_input_dir(a.input_dir);
  for (const auto& p : a.input_pbs) inputs.push_back(onnx_io::load_tensor(p));
  if (inputs.empty()) {
    GAF_CHECK(a.random_inputs || s.required_inputs().empty(),
              "the model needs {} input(s): give --input-pb FILE... or --inputs DIR, or --random-inputs",
              s.required_inputs().size());
    inputs = tools::random_inputs(s.graph(), a.seed);
  }
  return inputs;
}

int cmd_run(const RunArgs& a) {
  Model m = onnx_io::load_model(a.model);
  runtime::Session session(*m.graph);
  std::vector<Tensor> inputs = gather_inputs(a, session);
  tools::Timing timing;
  std::vector<Tensor> outs = tools::time_runs(session, inputs, a.iterations, timing);
  const Graph& g = *m.graph;
  for (size_t i = 0; i < outs.size(); ++i)
    std::cout << g.outputs()[i]->name() << ": " << outs[i].to_string(8) << "\n";
  if (a.iterations > 0)
    std::cout << fmt::format("latency over {} runs: min {:.3f} ms, median {:.3f} ms; peak intermediate memory {:.2f} MB\n",
                             timing.iterations, timing.min_s * 1e3, timing.median_s * 1e3,
                             session.stats().peak_bytes / 1e6);
  if (!a.save_outputs.empty()) {
    std::filesystem::create_directories(a.save_outputs);
    for (size_t i = 0; i < outs.size(); ++i)
      onnx_io::save_tensor(outs[i], (std::filesystem::path(a.save_outputs) / fmt::format("output_{}.pb", i)).string(),
                           g.outputs()[i]->name());
    std::cout << "wrote " << outs.size() << " output(s) to " << a.save_outputs << "\n";
  }
  return 0;
}

int cmd_demo() {
  Model m = tools::demo_transformer_block();
  std::cout << "Built-in model: " << m.graph->name << " (seq 128, d_model 256, 4 heads, d_ff 1024)\n";
  std::cout << tools::model_info(m);
  runtime::Session session(*m.graph);
  auto inputs = tools::random_inputs(*m.graph, 1);
  tools::Timing timing;
  tools::time_runs(session, inputs, 20, timing);
  std::cout << fmt::format("unfused run: min {:.3f} ms, median {:.3f} ms over {} runs, {} kernels, peak {:.2f} MB\n",
                           timing.min_s * 1e3, timing.median_s * 1e3, timing.iterations, m.graph->num_nodes(),
                           session.stats().peak_bytes / 1e6);
  return 0;
}

int cmd_compare(const std::string& actual, const std::string& expected, double rtol, double atol) {
  auto c = tools::compare(onnx_io::load_tensor(actual), onnx_io::load_tensor(expected), rtol, atol);
  std::cout << fmt::format("{}: max abs error {:.3g}, max rel error {:.3g}{}{}\n", c.ok ? "match" : "MISMATCH",
                           c.max_abs_err, c.max_rel_err, c.ok ? "" : "; first: ", c.message);
  return c.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"graph-autofusion: fuses the operators of ONNX models and runs them"};
  app.require_subcommand(1);

  std::string info_model;
  auto* info = app.add_subcommand("info", "op histogram, parameters, inputs and outputs of a model");
  info->add_option("model", info_model, "ONNX model file")->required();

  RunArgs run_args;
  auto* run = app.add_subcommand("run", "run a model on the CPU runtime");
  run->add_option("model", run_args.model, "ONNX model file")->required();
  run->add_option("--input-pb", run_args.input_pbs, "TensorProto files, one per input in graph input order");
  run->add_option("--inputs", run_args.input_dir, "folder with input_<i>.pb files");
  run->add_flag("--random-inputs", run_args.random_inputs, "seeded random inputs");
  run->add_option("--seed", run_args.seed, "seed for --random-inputs");
  run->add_option("--save-outputs", run_args.save_outputs, "write output_<i>.pb files to this folder");
  run->add_option("--iterations", run_args.iterations, "timed runs after one warm-up; prints min and median")
      ->check(CLI::NonNegativeNumber);

  auto* demo = app.add_subcommand("demo", "build, run and report the built-in transformer block");

  std::string cmp_actual, cmp_expected;
  double cmp_rtol = 1e-3, cmp_atol = 1e-5;
  auto* compare = app.add_subcommand("compare", "compare two TensorProto files within a tolerance");
  compare->add_option("actual", cmp_actual)->required();
  compare->add_option("expected", cmp_expected)->required();
  compare->add_option("--rtol", cmp_rtol);
  compare->add_option("--atol", cmp_atol);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*info) return cmd_info(info_model);
    if (*run) return cmd_run(run_args);
    if (*demo) return cmd_demo();
    if (*compare) return cmd_compare(cmp_actual, cmp_expected, cmp_rtol, cmp_atol);
  } catch (const gaf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
