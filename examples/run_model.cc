// A C++ program using graph-autofusion as an installed library: loads an ONNX model, fuses it in memory, runs it
// on the CPU runtime with seeded random inputs and prints each output. Built against the installed package:
//
//   cmake --install build/release --prefix PREFIX
//   cmake -S examples -B build-example -DCMAKE_PREFIX_PATH=PREFIX && cmake --build build-example
//   build-example/run_model model.onnx
//
// or with pkg-config: c++ run_model.cc $(pkg-config --cflags --libs graph_autofusion) -o run_model
#include <gaf/session.h>
#include <gaf/tools.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: run_model MODEL.onnx\n";
    return 2;
  }
  try {
    gaf::Model model = gaf::tools::read_model(argv[1]);  // as the CLI reads it
    gaf::tools::FuseOptions opts;  // opt level 2 for the CPU
    std::cout << gaf::tools::fuse_model(model, opts).summary_line() << "\n";
    gaf::runtime::Session session(*model.graph);
    std::vector<gaf::Tensor> outputs = session.run(gaf::tools::random_inputs(*model.graph, 0));
    for (size_t i = 0; i < outputs.size(); ++i)
      std::cout << model.graph->outputs()[i]->name() << ": " << outputs[i].to_string(4) << "\n";
    return 0;
  } catch (const gaf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
