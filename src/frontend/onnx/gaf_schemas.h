#pragma once

namespace onnx {
class ISchemaRegistry;
}

namespace gaf::onnx_io {

// Registers the "gaf" domain's op schemas with ONNX (once; thread-safe). Called before any checker or shape
// inference run.
void register_gaf_schemas();

// The schemas shape inference runs with: ONNX's registry (and ours), where the convolutions' and pools'
// inference first checks the ranks ONNX 1.12 would index past, and STFT's and opset 20 DFT's inference is
// ours (ONNX 1.12's gets their output shapes wrong; guarded_schemas.cc).
const onnx::ISchemaRegistry* schema_registry();

}  // namespace gaf::onnx_io
