"""An int8 build of an ONNX model: MiniLM's default compute (embedders/minilm.py).

The packaged MiniLM stores its weights as int8 but computes in float32: onnxruntime folds the
weights back to float32 when it loads the model. A query of 10-20 tokens is then 4-7 ms of float32
matrix products on one core, the longest step of an assemble call with vectors. This build
quantizes the weight matrices per output channel and the activations per call (onnxruntime's
dynamic quantization, weights-only MatMuls), so that those products run on the CPU's int8 units.

Measured on the benchmark machine (AMD EPYC, AVX-512 VNNI, one thread): an 11-token query in
2.3 ms against 4.7 ms; LoCoMo turns embedded one at a time at 179 a second against 109 for the
packaged model in batches on two threads; cosine 0.993-0.996 with the packaged model's vectors;
LoCoMo (dev) turn recall 0.798 / 0.868 / 0.909 / 0.944 at 500 / 1,000 / 2,000 / 4,000 tokens
(docs/vectors.md). MiniLMEmbedder checks the build against the packaged model on a few probe
texts before it uses it (on x86 CPUs without VNNI, int8 products can saturate).

Building takes a few seconds, once: the file is kept in a cache directory (`CONTEXTWRIGHT_CACHE`,
else `$XDG_CACHE_HOME/contextwright`, else `~/.cache/contextwright`), named after the source
model's sha256 and onnxruntime's version, so that a new model or runtime builds anew (and the
older build is removed). Where that directory cannot be written, the build is used from memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("contextwright.embedders")


def cache_dir() -> Path:
    explicit = os.environ.get("CONTEXTWRIGHT_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "contextwright"


def int8_model(source: Path, sha256: str | None = None) -> bytes:
    """The int8 build of the ONNX model at `source` (whose sha256 the caller may know already),
    from the cache or built (and cached)."""
    import onnxruntime as ort

    digest = (sha256 or hashlib.sha256(source.read_bytes()).hexdigest())[:16]
    target = cache_dir() / f"{source.stem}-{digest}-int8-ort{ort.__version__}.onnx"
    try:
        return target.read_bytes()
    except OSError:
        pass
    log.info("building the int8 build of %s into %s (once, a few seconds)", source.name, target)
    built = build_int8(source)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        partial.write_bytes(built)
        os.replace(partial, target)  # atomic: a concurrent builder writes the same bytes
        for stale in target.parent.glob(f"{source.stem}-*-int8-ort*.onnx"):
            if stale != target:  # built for another model file or runtime: 59 MB each
                stale.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home: use the build from memory
    return built


def build_int8(source: Path) -> bytes:
    """Fold the model's constants (onnxruntime's basic optimizations, which turn the stored int8
    weights into float32 initializers), then quantize every MatMul whose second input is a
    weight, per output channel."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="contextwright-") as tmp:
        folded, out = Path(tmp) / "folded.onnx", Path(tmp) / "int8.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.log_severity_level = 3
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        quiet = _QuietQuantizer()
        logging.getLogger().addFilter(quiet)
        try:
            quantize_dynamic(
                folded,
                out,
                op_types_to_quantize=["MatMul"],
                per_channel=True,
                weight_type=QuantType.QInt8,
                extra_options={"MatMulConstBOnly": True},
            )
        finally:
            logging.getLogger().removeFilter(quiet)
        return out.read_bytes()


class _QuietQuantizer(logging.Filter):
    """Drops the quantizer's advice to pre-process the model (shape inference for static
    quantization), which does not apply to dynamic quantization of weights."""

    def filter(self, record: Any) -> bool:
        return "onnxruntime" not in str(record.pathname)
