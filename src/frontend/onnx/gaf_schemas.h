#pragma once

namespace gaf::onnx_io {

// Registers the "gaf" domain's op schemas with ONNX (once; thread-safe). Called before any checker or shape
// inference run.
void register_gaf_schemas();

}  // namespace gaf::onnx_io
